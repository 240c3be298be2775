package podcheck

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/winready/winready/internal/preflight"
)

// Report keys besides preflight's ReportRound, ReportNode and ReportError.
const (
	// ReportStage is StageServing once the pod serves its echo (with its
	// address), StageDone once its checks ran.
	ReportStage   = "stage"
	ReportPodIP   = "podIP"
	ReportMTU     = "mtu"
	ReportPeers   = "peers"
	ReportDNS     = "dns"
	ReportService = "service"
	ReportDetail  = "detail"

	StageServing = "serving"
	StageDone    = "done"
)

// Plan keys of a check round besides one per node; they start with
// preflight.PlanMetaPrefix.
const (
	PlanService = preflight.PlanMetaPrefix + "service"
	PlanDNSName = preflight.PlanMetaPrefix + "dns"
	PlanMTU     = preflight.PlanMetaPrefix + "mtu"
)

// NodeReport is one check pod's report.
type NodeReport struct {
	Node   string
	Stage  string
	PodIP  netip.Addr
	Error  string
	Result Result
}

// EncodeServing is the report of a pod that serves and waits for its plan.
func EncodeServing(round, node string, podIP netip.Addr, mtu int) map[string]string {
	return map[string]string{preflight.ReportRound: round, preflight.ReportNode: node, ReportStage: StageServing,
		ReportPodIP: podIP.String(), ReportMTU: strconv.Itoa(mtu)}
}

// EncodeDone is the report of a pod whose checks ran; failure, when set,
// says why they could not.
func EncodeDone(round, node string, podIP netip.Addr, r Result, failure string) map[string]string {
	peers := make([]string, len(r.Peers))
	for i, p := range r.Peers {
		peers[i] = fmt.Sprintf("%s:%s,%s,%s,%d", p.Peer, p.ICMP, p.TCPSmall, p.TCPFull, p.PathMTU)
	}
	return map[string]string{preflight.ReportRound: round, preflight.ReportNode: node, ReportStage: StageDone,
		ReportPodIP: podIP.String(), ReportMTU: strconv.Itoa(r.MTU), ReportPeers: strings.Join(peers, ";"),
		ReportDNS: string(r.DNS), ReportService: string(r.Service), ReportDetail: r.Detail, preflight.ReportError: failure}
}

// DecodeReport reads a report's data.
func DecodeReport(d map[string]string) (NodeReport, error) {
	r := NodeReport{Node: d[preflight.ReportNode], Stage: d[ReportStage], Error: d[preflight.ReportError]}
	var err error
	if r.PodIP, err = netip.ParseAddr(d[ReportPodIP]); err != nil {
		return r, fmt.Errorf("report of %s: pod address: %w", r.Node, err)
	}
	r.Result.MTU, _ = strconv.Atoi(d[ReportMTU])
	r.Result.DNS, r.Result.Service, r.Result.Detail = outcome(d[ReportDNS]), outcome(d[ReportService]), d[ReportDetail]
	if d[ReportPeers] == "" {
		return r, nil
	}
	for _, entry := range strings.Split(d[ReportPeers], ";") {
		addr, checks, _ := strings.Cut(entry, ":")
		f := strings.Split(checks, ",")
		peer, err := netip.ParseAddr(addr)
		if err != nil || len(f) != 4 {
			return r, fmt.Errorf("report of %s: peer entry %q", r.Node, entry)
		}
		mtu, _ := strconv.Atoi(f[3])
		r.Result.Peers = append(r.Result.Peers, PeerResult{Peer: peer, ICMP: outcome(f[0]), TCPSmall: outcome(f[1]), TCPFull: outcome(f[2]), PathMTU: mtu})
	}
	return r, nil
}

func outcome(s string) Outcome {
	switch Outcome(s) {
	case Pass, Fail:
		return Outcome(s)
	}
	return Unknown
}

// PlanSettings are the settings every pod of a round shares.
type PlanSettings struct {
	Service netip.AddrPort
	DNSName string
	MTU     int
}

// EncodeSettings adds a round's settings to plan data.
func EncodeSettings(data map[string]string, s PlanSettings) {
	if s.Service.IsValid() {
		data[PlanService] = s.Service.String()
	}
	data[PlanDNSName] = s.DNSName
	data[PlanMTU] = strconv.Itoa(s.MTU)
}

// DecodeSettings reads a round's settings from plan data.
func DecodeSettings(data map[string]string) PlanSettings {
	s := PlanSettings{DNSName: data[PlanDNSName]}
	s.Service, _ = netip.ParseAddrPort(data[PlanService])
	s.MTU, _ = strconv.Atoi(data[PlanMTU])
	return s
}
