package podcheck

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/round"
)

// Pair is what a directed pair of nodes showed in a round: the pod on From
// tested the pod on To.
type Pair struct {
	From, To string
	ICMP     Outcome
	TCPSmall Outcome
	TCPFull  Outcome
	// PathMTU is the largest packet that reached To with Don't Fragment set,
	// 0 when not measured.
	PathMTU int
}

// Passed is true when no check of the pair failed.
func (p Pair) Passed() bool { return p.ICMP != Fail && p.TCPSmall != Fail && p.TCPFull != Fail }

// Checks is the pair's outcomes, "ICMP,TCPSmall,TCPFull" ("P,P,F").
func (p Pair) Checks() string {
	return string(p.ICMP) + "," + string(p.TCPSmall) + "," + string(p.TCPFull)
}

// Verdict is what a pair's results say.
type Verdict string

// The verdicts on a pair, each naming its likely cause.
const (
	VerdictPass Verdict = "Pass"
	// VerdictAsBaseline means the pair fails, but no worse than before the first change.
	VerdictAsBaseline      Verdict = "AsBaseline"
	VerdictChecksumOffload Verdict = "ChecksumOffload"
	VerdictMTU             Verdict = "MTU"
	VerdictVXLANPath       Verdict = "VXLANPath"
	VerdictOther           Verdict = "Other"
)

// VXLANOverhead is what VXLAN adds to a pod packet on the node interfaces:
// outer IPv4, UDP, VXLAN and Ethernet headers.
const VXLANOverhead = 50

// Input is what Diagnose compares.
type Input struct {
	// Baseline holds the pairs that did not pass before the first change;
	// a pair not listed passed then (or was not tested).
	Baseline []Pair
	// After holds every tested pair of the round after a step.
	After []Pair
	// PodMTU is the MTU pods use; NodeMTU the node interfaces' (0: unknown).
	PodMTU, NodeMTU int
	// DNSFailing and ServiceFailing are the nodes whose pods could not
	// resolve kubernetes.default or reach the Service ClusterIP, and did
	// before; Missing the nodes whose pods did not report.
	DNSFailing, ServiceFailing, Missing []string
	// Why holds, by node, what a missing node's pod said when it gave up
	// before its checks.
	Why map[string]string
	// Rerun is how a person runs the check again, for the message.
	Rerun string
}

// PairVerdict is one pair's verdict.
type PairVerdict struct {
	Pair
	Verdict Verdict
}

// Diagnosis is the outcome of comparing a round with the baseline.
type Diagnosis struct {
	// Worse is true when anything fails that passed in the baseline.
	Worse bool
	// Counts counts the pairs by verdict.
	Counts map[Verdict]int
	// Listed are the first failing pairs, worse ones first, at most listMax.
	Listed []PairVerdict
	// Message names what broke, the pairs and the fix.
	Message string
}

// verdictOrder lists failing verdicts from the most to the least telling.
var verdictOrder = []Verdict{VerdictVXLANPath, VerdictChecksumOffload, VerdictMTU, VerdictOther, VerdictAsBaseline}

// Classify gives a pair's verdict against its baseline (nil: it passed).
func Classify(after Pair, base *Pair) Verdict {
	if after.Passed() {
		return VerdictPass
	}
	if base != nil && !worse(after, *base) {
		return VerdictAsBaseline
	}
	switch {
	case after.ICMP == Fail && after.TCPSmall == Fail && after.TCPFull == Fail:
		return VerdictVXLANPath
	case after.ICMP == Pass && after.TCPSmall == Fail:
		return VerdictChecksumOffload
	case after.TCPSmall == Pass && after.TCPFull == Fail:
		return VerdictMTU
	}
	return VerdictOther
}

// worse is true when a check fails after that did not fail in base.
func worse(after, base Pair) bool {
	return after.ICMP == Fail && base.ICMP != Fail ||
		after.TCPSmall == Fail && base.TCPSmall != Fail ||
		after.TCPFull == Fail && base.TCPFull != Fail
}

// listMax bounds the pairs a diagnosis lists, and namesMax those its
// message names per finding.
const (
	listMax  = 20
	namesMax = 5
)

// Diagnose gives a verdict per pair and names what broke since the
// baseline. Its lists and message are bounded whatever the cluster's size.
func Diagnose(in Input) Diagnosis {
	base := make(map[[2]string]*Pair, len(in.Baseline))
	for i := range in.Baseline {
		base[[2]string{in.Baseline[i].From, in.Baseline[i].To}] = &in.Baseline[i]
	}
	d := Diagnosis{Counts: map[Verdict]int{}}
	byVerdict := map[Verdict][]Pair{}
	for _, pair := range in.After {
		v := Classify(pair, base[[2]string{pair.From, pair.To}])
		d.Counts[v]++
		if v == VerdictPass {
			continue
		}
		if v != VerdictAsBaseline {
			d.Worse = true
		}
		if len(byVerdict[v]) < listMax {
			byVerdict[v] = append(byVerdict[v], pair)
		}
	}
	for _, v := range verdictOrder {
		for _, pair := range byVerdict[v] {
			if len(d.Listed) < listMax {
				d.Listed = append(d.Listed, PairVerdict{Pair: pair, Verdict: v})
			}
		}
	}
	d.Worse = d.Worse || len(in.DNSFailing) > 0 || len(in.ServiceFailing) > 0 || len(in.Missing) > 0
	d.Message = message(in, d, byVerdict)
	return d
}

func message(in Input, d Diagnosis, byVerdict map[Verdict][]Pair) string {
	var parts []string
	for _, v := range verdictOrder {
		if n := d.Counts[v]; n > 0 && v != VerdictAsBaseline {
			parts = append(parts, finding(v, in, n, byVerdict[v]))
		}
	}
	// DNS and Services ride on the same pairs: name them as a consequence
	// when pairs fail too.
	follows := ""
	if len(parts) > 0 {
		follows = ", unless this follows from the pairs above"
	}
	if len(in.DNSFailing) > 0 {
		parts = append(parts, fmt.Sprintf("DNS: pods on %s cannot resolve %s through kube-dns%s; check the CoreDNS pods and the kube-dns Service",
			names(in.DNSFailing, len(in.DNSFailing)), DNSName, follows))
	}
	if len(in.ServiceFailing) > 0 {
		parts = append(parts, fmt.Sprintf("Service: pods on %s cannot reach a Service ClusterIP%s; check kube-proxy on these nodes",
			names(in.ServiceFailing, len(in.ServiceFailing)), follows))
	}
	if len(in.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("no report from the check pods on %s: look at the %s pods there (a pod that cannot start has no pod network)",
			namesWithWhy(in.Missing, in.Why), Name))
	}
	if len(parts) == 0 {
		if n := d.Counts[VerdictAsBaseline]; n > 0 {
			return fmt.Sprintf("the pod network is no worse than before the first change: %d pairs fail as they did then", n)
		}
		return fmt.Sprintf("the pod network passes on all %d tested pairs", d.Counts[VerdictPass])
	}
	msg := strings.Join(parts, ". ")
	if in.Rerun != "" {
		msg += ". Then run the check again: " + in.Rerun
	}
	return msg
}

func finding(v Verdict, in Input, n int, listed []Pair) string {
	pairs := names(pairLabels(listed), n)
	switch v {
	case VerdictVXLANPath:
		return fmt.Sprintf("VXLAN path: nothing passes (ICMP, TCP) on %d pairs: %s. UDP 4789 does not get between these nodes: "+
			"open UDP 4789 between them (security groups, host firewalls), and check that the sending node has a route "+
			"to the receiver's block via vxlan.calico (`ip route show dev vxlan.calico`) and that the receiver has a VXLAN "+
			"tunnel address (Node annotation projectcalico.org/IPv4VXLANTunnelAddr)", n, pairs)
	case VerdictChecksumOffload:
		return fmt.Sprintf("checksum offload: ICMP passes but TCP does not on %d pairs: %s. Packets leave vxlan.calico with checksums "+
			"the NIC should have filled in and did not (VMware, some clouds). Fix: kubectl patch felixconfiguration default --type=merge "+
			"-p '{\"spec\":{\"featureDetectOverride\":\"ChecksumOffloadBroken=true\"}}', or `ethtool -K vxlan.calico tx off` on every node", n, pairs)
	case VerdictMTU:
		return mtuFinding(in, n, pairs, listed)
	}
	return fmt.Sprintf("%d pairs fail in another way: %s (checks ICMP,TCP,full-size TCP: %s)", n, pairs, listed[0].Checks())
}

func mtuFinding(in Input, n int, pairs string, listed []Pair) string {
	path := 0
	for _, p := range listed {
		if p.PathMTU > 0 && (path == 0 || p.PathMTU < path) {
			path = p.PathMTU
		}
	}
	measured := "the largest packet that passes was not measured"
	fix := fmt.Sprintf("lower spec.calicoNetwork.mtu in the Installation below %d", in.PodMTU)
	if path > 0 {
		measured = fmt.Sprintf("the largest pod packet that passes is %d bytes, so the path carries %d with VXLAN's %d", path, path+VXLANOverhead, VXLANOverhead)
		fix = fmt.Sprintf("set spec.calicoNetwork.mtu in the Installation to %d", path)
	}
	node := "unknown to winready (`ip link` on the nodes)"
	if in.NodeMTU > 0 {
		node = fmt.Sprint(in.NodeMTU)
	}
	return fmt.Sprintf("MTU: small TCP passes but full-size TCP does not on %d pairs: %s. Pods use MTU %d, which needs %d on every "+
		"link between nodes; the node interface MTU is %s; %s. Fix: %s, or raise the MTU of the path",
		n, pairs, in.PodMTU, in.PodMTU+VXLANOverhead, node, measured, fix)
}

func pairLabels(pairs []Pair) []string {
	labels := make([]string, len(pairs))
	for i, p := range pairs {
		labels[i] = p.From + " -> " + p.To
	}
	return labels
}

// names lists the first few of total names.
func names(listed []string, total int) string {
	shown := slices.Clone(listed[:min(len(listed), namesMax)])
	s := strings.Join(shown, ", ")
	if more := total - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// whyMax bounds each reason quoted in a diagnosis, so that the rerun command
// at its end always fits.
const whyMax = 160

// namesWithWhy names nodes as names does, each shown followed by what its pod
// said, when it said something.
func namesWithWhy(nodes []string, why map[string]string) string {
	shown := slices.Clone(nodes[:min(len(nodes), namesMax)])
	for i, n := range shown {
		if w := why[n]; w != "" {
			shown[i] = fmt.Sprintf("%s (%s)", n, round.Truncate(w, whyMax))
		}
	}
	return names(shown, len(nodes))
}

// SortPairs orders pairs by sender, then receiver.
func SortPairs(pairs []Pair) {
	slices.SortFunc(pairs, func(a, b Pair) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
}

// Summary is a round's reports read against its plans.
type Summary struct {
	// Pairs holds every tested pair, sorted.
	Pairs []Pair
	// DNSFailing, ServiceFailing and Missing name nodes, sorted.
	DNSFailing, ServiceFailing, Missing []string
	// PodMTU is the largest MTU a pod reported.
	PodMTU int
	// Errors are the reasons pods gave for not running their checks.
	Errors map[string]string
}

// Aggregate reads the reports of the pods the plans paired, by node name. A
// planned pod without a report of its checks is missing; its peers' results
// for it still count, since it served when it was paired.
func Aggregate(res round.Results[Params, Result]) Summary {
	nodeOf := make(map[netip.Addr]string, len(res.Plans))
	for _, p := range res.Plans {
		nodeOf[p.Addr] = p.Node
	}
	s := Summary{Errors: map[string]string{}}
	for _, plan := range res.Plans {
		r, ok := res.Reports[plan.Node]
		if !ok {
			s.Missing = append(s.Missing, plan.Node)
			if why := res.Failed[plan.Node]; why != "" {
				s.Errors[plan.Node] = why
			}
			continue
		}
		s.PodMTU = max(s.PodMTU, r.Result.MTU)
		if r.Result.DNS == Fail {
			s.DNSFailing = append(s.DNSFailing, plan.Node)
		}
		if r.Result.Service == Fail {
			s.ServiceFailing = append(s.ServiceFailing, plan.Node)
		}
		for _, pr := range r.Result.Peers {
			to, known := nodeOf[pr.Peer]
			if !known || !slices.Contains(plan.Peers, pr.Peer) {
				continue
			}
			s.Pairs = append(s.Pairs, Pair{From: plan.Node, To: to, ICMP: pr.ICMP, TCPSmall: pr.TCPSmall, TCPFull: pr.TCPFull, PathMTU: pr.PathMTU})
		}
	}
	SortPairs(s.Pairs)
	slices.Sort(s.Missing)
	return s
}

// PairOf is a failing pair as the status lists it, its Checks as
// Pair.Checks writes them.
func PairOf(r v1alpha1.PodPairResult) Pair {
	c := strings.SplitN(r.Checks, ",", 3)
	check := func(i int) Outcome {
		if i < len(c) {
			return outcome(c[i])
		}
		return Unknown
	}
	return Pair{From: r.From, To: r.To, ICMP: check(0), TCPSmall: check(1), TCPFull: check(2), PathMTU: int(r.PathMTU)}
}

func outcome(s string) Outcome {
	switch Outcome(s) {
	case Pass, Fail:
		return Outcome(s)
	}
	return Unknown
}

// Judge fills a finished round from its results, compared pair by pair with
// the baseline (nil when the round is the baseline). The round's Missing
// holds, on the way in, the nodes whose pod did not serve in time; rerun is
// how a person runs the check again, for the diagnosis.
func Judge(r *v1alpha1.PodCheckRound, res round.Results[Params, Result], baseline *v1alpha1.PodCheckRound, rerun string) {
	sum := Aggregate(res)
	in := Input{After: sum.Pairs, PodMTU: sum.PodMTU, Rerun: rerun}
	missing := append(slices.Clone(r.Missing), sum.Missing...)
	in.DNSFailing, in.ServiceFailing, in.Missing, in.Why = sum.DNSFailing, sum.ServiceFailing, missing, sum.Errors
	if baseline != nil {
		for _, f := range baseline.Failing {
			in.Baseline = append(in.Baseline, PairOf(f))
		}
		in.DNSFailing = without(sum.DNSFailing, baseline.DNSFailing)
		in.ServiceFailing = without(sum.ServiceFailing, baseline.ServiceFailing)
		in.Missing = without(missing, baseline.Missing)
	}
	d := Diagnose(in)
	r.PodMTU, r.TestedPairs = int32(sum.PodMTU), int32(len(sum.Pairs))
	r.FailingPairs = int32(len(sum.Pairs) - d.Counts[VerdictPass])
	r.WorsePairs = r.FailingPairs - int32(d.Counts[VerdictAsBaseline])
	r.Failing = nil
	for _, v := range d.Listed {
		r.Failing = append(r.Failing, v1alpha1.PodPairResult{From: v.From, To: v.To, Verdict: v1alpha1.PodCheckVerdict(v.Verdict),
			Checks: v.Checks(), PathMTU: int32(v.PathMTU)})
	}
	r.DNSFailing, r.ServiceFailing = round.FirstListed(sum.DNSFailing), round.FirstListed(sum.ServiceFailing)
	r.Missing = round.FirstListed(missing)
	r.Worse, r.Diagnosis = d.Worse, round.Truncate(d.Message, MaxDiagnosis)
}

// MaxDiagnosis is the CRD's limit on a round's diagnosis.
const MaxDiagnosis = 2048

// without is names less those in the baseline's list.
func without(names, baseline []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(baseline, n) })
}
