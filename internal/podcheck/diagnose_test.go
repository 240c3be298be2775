package podcheck

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/round"
)

func pair(from, to string, checks string, pathMTU int) Pair {
	f := strings.Split(checks, ",")
	return Pair{From: from, To: to, ICMP: Outcome(f[0]), TCPSmall: Outcome(f[1]), TCPFull: Outcome(f[2]), PathMTU: pathMTU}
}

// ring returns every ordered pair of nodes a, b, c with the given checks,
// except those in override.
func ring(checks string, override ...Pair) []Pair {
	var pairs []Pair
	for _, from := range []string{"a", "b", "c"} {
		for _, to := range []string{"a", "b", "c"} {
			if from == to {
				continue
			}
			p := pair(from, to, checks, 0)
			for _, o := range override {
				if o.From == from && o.To == to {
					p = o
				}
			}
			pairs = append(pairs, p)
		}
	}
	return pairs
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  string
		base   string // "" when the pair passed in the baseline
		expect Verdict
	}{
		{"everything passes", "P,P,P", "", VerdictPass},
		{"ICMP unknown, TCP passes", "-,P,P", "", VerdictPass},
		{"ICMP passes, TCP fails: checksum offload", "P,F,F", "", VerdictChecksumOffload},
		{"small TCP passes, full-size fails: MTU", "P,P,F", "", VerdictMTU},
		{"MTU without ICMP socket", "-,P,F", "", VerdictMTU},
		{"nothing passes: VXLAN path", "F,F,F", "", VerdictVXLANPath},
		{"only ICMP fails", "F,P,P", "", VerdictOther},
		{"TCP fails and ICMP unknown", "-,F,F", "", VerdictOther},
		{"fails as in the baseline", "P,P,F", "P,P,F", VerdictAsBaseline},
		{"worse than the baseline", "F,F,F", "P,P,F", VerdictVXLANPath},
		{"better than the baseline still fails as then", "P,P,F", "F,F,F", VerdictAsBaseline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var base *Pair
			if tc.base != "" {
				b := pair("a", "b", tc.base, 0)
				base = &b
			}
			if got := Classify(pair("a", "b", tc.after, 0), base); got != tc.expect {
				t.Errorf("Classify(%s against %q) = %s, want %s", tc.after, tc.base, got, tc.expect)
			}
		})
	}
}

func TestDiagnose(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        Input
		worse     bool
		counts    map[Verdict]int
		listed    []string // "from->to verdict"
		mentions  []string
		mentionsN []string // must not appear
	}{{
		name:     "all pass",
		in:       Input{After: ring("P,P,P"), PodMTU: 1450},
		counts:   map[Verdict]int{VerdictPass: 6},
		mentions: []string{"passes on all 6 tested pairs"},
	}, {
		name:   "checksum offload everywhere",
		in:     Input{After: ring("P,F,F"), PodMTU: 1450, Rerun: "kubectl annotate wr default x=1"},
		worse:  true,
		counts: map[Verdict]int{VerdictChecksumOffload: 6},
		listed: []string{"a->b ChecksumOffload", "a->c ChecksumOffload", "b->a ChecksumOffload", "b->c ChecksumOffload", "c->a ChecksumOffload", "c->b ChecksumOffload"},
		mentions: []string{"checksum offload: ICMP passes but TCP does not on 6 pairs", `"featureDetectOverride":"ChecksumOffloadBroken=true"`,
			"ethtool -K vxlan.calico tx off", "a -> b, a -> c, b -> a, b -> c, c -> a and 1 more", "run the check again: kubectl annotate wr default x=1"},
	}, {
		name:     "MTU with a measured path",
		in:       Input{After: ring("P,P,F", pair("a", "b", "P,P,F", 1350), pair("b", "a", "P,P,F", 1372)), PodMTU: 1450, NodeMTU: 1500},
		worse:    true,
		counts:   map[Verdict]int{VerdictMTU: 6},
		mentions: []string{"MTU: small TCP passes but full-size TCP does not on 6 pairs", "Pods use MTU 1450, which needs 1500", "node interface MTU is 1500", "largest pod packet that passes is 1350 bytes, so the path carries 1400", "spec.calicoNetwork.mtu in the Installation to 1350"},
	}, {
		name:      "one pair's VXLAN path, named exactly",
		in:        Input{After: ring("P,P,P", pair("a", "c", "F,F,F", 0)), PodMTU: 1450},
		worse:     true,
		counts:    map[Verdict]int{VerdictPass: 5, VerdictVXLANPath: 1},
		listed:    []string{"a->c VXLANPath"},
		mentions:  []string{"VXLAN path: nothing passes (ICMP, TCP) on 1 pairs: a -> c.", "UDP 4789"},
		mentionsN: []string{"b -> ", "c -> a"},
	}, {
		name:      "failures already in the baseline are not worse",
		in:        Input{Baseline: []Pair{pair("a", "c", "P,P,F", 0)}, After: ring("P,P,P", pair("a", "c", "P,P,F", 0)), PodMTU: 1450},
		counts:    map[Verdict]int{VerdictPass: 5, VerdictAsBaseline: 1},
		listed:    []string{"a->c AsBaseline"},
		mentions:  []string{"no worse than before the first change: 1 pairs fail as they did then"},
		mentionsN: []string{"MTU:"},
	}, {
		name:     "DNS, Service and missing pods",
		in:       Input{After: ring("P,P,P"), DNSFailing: []string{"b"}, ServiceFailing: []string{"c"}, Missing: []string{"d"}},
		worse:    true,
		counts:   map[Verdict]int{VerdictPass: 6},
		mentions: []string{"DNS: pods on b cannot resolve kubernetes.default", "Service: pods on c cannot reach", "no report from the check pods on d"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := Diagnose(tc.in)
			t.Log(d.Message)
			if d.Worse != tc.worse {
				t.Errorf("worse %v, want %v", d.Worse, tc.worse)
			}
			for v, n := range tc.counts {
				if d.Counts[v] != n {
					t.Errorf("%s: %d pairs, want %d (%v)", v, d.Counts[v], n, d.Counts)
				}
			}
			if tc.listed != nil {
				var got []string
				for _, pv := range d.Listed {
					got = append(got, pv.From+"->"+pv.To+" "+string(pv.Verdict))
				}
				if !slices.Equal(got, tc.listed) {
					t.Errorf("listed %v, want %v", got, tc.listed)
				}
			}
			for _, m := range tc.mentions {
				if !strings.Contains(d.Message, m) {
					t.Errorf("message lacks %q", m)
				}
			}
			for _, m := range tc.mentionsN {
				if strings.Contains(d.Message, m) {
					t.Errorf("message has %q", m)
				}
			}
		})
	}
}

func TestDiagnosisStaysBounded(t *testing.T) {
	var after []Pair
	names := make([]string, 5000)
	for i := range 5000 {
		names[i] = fmt.Sprintf("node-%04d-%s", i, strings.Repeat("x", 200))
		after = append(after, pair(names[i], fmt.Sprintf("peer-%d", i), "F,F,F", 0))
	}
	d := Diagnose(Input{After: after, DNSFailing: names, ServiceFailing: names, Missing: names, PodMTU: 1450})
	if len(d.Listed) != listMax {
		t.Errorf("listed %d pairs, want %d", len(d.Listed), listMax)
	}
	if d.Counts[VerdictVXLANPath] != 5000 {
		t.Errorf("counted %d VXLAN path pairs, want 5000", d.Counts[VerdictVXLANPath])
	}
	if len(d.Message) > 8192 {
		t.Errorf("message of %d bytes", len(d.Message))
	}
	if !strings.Contains(d.Message, "and 4995 more") {
		t.Errorf("message does not say how many more: %.300s", d.Message)
	}
}

func TestAggregateMapsPodsToNodes(t *testing.T) {
	ip := netip.MustParseAddr
	plan := func(node, addr string, peers ...netip.Addr) round.Plan[Params] {
		return round.Plan[Params]{Round: "r", Node: node, Addr: ip(addr), Peers: peers}
	}
	done := func(node string, r Result) round.Report[Result] {
		return round.Report[Result]{Round: "r", Node: node, Stage: round.Done, Result: r}
	}
	res := round.Results[Params, Result]{
		Plans: []round.Plan[Params]{plan("a", "10.0.1.2", ip("10.0.2.2"), ip("10.0.3.2")), plan("b", "10.0.2.2", ip("10.0.1.2")),
			plan("c", "10.0.3.2", ip("10.0.1.2"))},
		Reports: map[string]round.Report[Result]{
			"a": done("a", Result{MTU: 1450, DNS: Pass, Service: Fail, Peers: []PeerResult{
				{Peer: ip("10.0.2.2"), ICMP: Pass, TCPSmall: Pass, TCPFull: Pass},
				{Peer: ip("10.0.3.2"), ICMP: Fail, TCPSmall: Fail, TCPFull: Fail},
				{Peer: ip("10.9.9.9"), ICMP: Fail, TCPSmall: Fail, TCPFull: Fail}, // not planned
			}}),
			"b": done("b", Result{MTU: 1450, DNS: Fail, Service: Pass, Peers: []PeerResult{{Peer: ip("10.0.1.2"), ICMP: Pass, TCPSmall: Pass, TCPFull: Pass}}}),
		},
		Failed: map[string]string{"c": "the agent came up too late"},
	}
	s := Aggregate(res)
	var got []string
	for _, p := range s.Pairs {
		got = append(got, p.From+"->"+p.To+" "+p.Checks())
	}
	if want := []string{"a->b P,P,P", "a->c F,F,F", "b->a P,P,P"}; !slices.Equal(got, want) {
		t.Errorf("pairs %v, want %v", got, want)
	}
	if !slices.Equal(s.Missing, []string{"c"}) || !slices.Equal(s.DNSFailing, []string{"b"}) || !slices.Equal(s.ServiceFailing, []string{"a"}) || s.PodMTU != 1450 {
		t.Errorf("missing %v, DNS failing %v, Service failing %v, MTU %d", s.Missing, s.DNSFailing, s.ServiceFailing, s.PodMTU)
	}
	if s.Errors["c"] == "" {
		t.Errorf("the reason c gave is lost: %v", s.Errors)
	}
}

func TestJudgeSaysWhyACheckPodDidNotReport(t *testing.T) {
	ip := netip.MustParseAddr
	res := round.Results[Params, Result]{
		Plans: []round.Plan[Params]{{Round: "r", Node: "a", Addr: ip("10.0.1.2"), Peers: []netip.Addr{ip("10.0.2.2")}},
			{Round: "r", Node: "b", Addr: ip("10.0.2.2"), Peers: []netip.Addr{ip("10.0.1.2")}}},
		Reports: map[string]round.Report[Result]{"a": {Round: "r", Node: "a", Stage: round.Done, Result: Result{MTU: 1450, DNS: Pass,
			Service: Pass, Peers: []PeerResult{{Peer: ip("10.0.2.2"), ICMP: Pass, TCPSmall: Pass, TCPFull: Pass}}}}},
		Failed: map[string]string{"b": "the pod came up 1m0s after its round began " + strings.Repeat("x", 600)},
	}
	r := &v1alpha1.PodCheckRound{}
	Judge(r, res, nil, "kubectl annotate wr default winready.io/rerun-podcheck=1")
	if !strings.Contains(r.Diagnosis, "no report from the check pods on b (the pod came up 1m0s after its round began x") {
		t.Errorf("the diagnosis does not say why b's pod did not report: %s", r.Diagnosis)
	}
	if !strings.HasSuffix(r.Diagnosis, "winready.io/rerun-podcheck=1") {
		t.Errorf("a long reason pushed the rerun command out of the diagnosis: %s", r.Diagnosis)
	}
}

func TestAPairListedInTheStatusReadsBackAsItWasWritten(t *testing.T) {
	for _, p := range []Pair{
		{From: "a", To: "b", ICMP: Pass, TCPSmall: Pass, TCPFull: Fail, PathMTU: 1350},
		{From: "a", To: "c", ICMP: Unknown, TCPSmall: Fail, TCPFull: Fail},
		{From: "c", To: "a", ICMP: Fail, TCPSmall: Fail, TCPFull: Fail},
	} {
		listed := v1alpha1.PodPairResult{From: p.From, To: p.To, Checks: p.Checks(), PathMTU: int32(p.PathMTU)}
		if got := PairOf(listed); got != p {
			t.Errorf("%+v reads back as %+v", p, got)
		}
	}
	if got := PairOf(v1alpha1.PodPairResult{From: "a", To: "b", Checks: "P"}); got.TCPSmall != Unknown || got.TCPFull != Unknown {
		t.Errorf("a short Checks reads as %+v, want the missing checks Unknown", got)
	}
}

func TestReportRoundTrip(t *testing.T) {
	pod := netip.MustParseAddr("10.0.1.2")
	r := Result{MTU: 1450, DNS: Pass, Service: Fail, Detail: "service: refused", Peers: []PeerResult{
		{Peer: netip.MustParseAddr("10.0.2.2"), ICMP: Pass, TCPSmall: Pass, TCPFull: Fail, PathMTU: 1350},
		{Peer: netip.MustParseAddr("10.0.3.2"), ICMP: Unknown, TCPSmall: Pass, TCPFull: Pass},
	}}
	cm, err := round.ReportObject(RoundKind, "ns", round.Report[Result]{Round: "r1", Node: "a", Stage: round.Done, Addr: pod, Result: r})
	if err != nil {
		t.Fatal(err)
	}
	got := round.DecodeReport[Result](cm)
	if got.Node != "a" || got.Stage != round.Done || got.Addr != pod || got.Result.MTU != 1450 || got.Result.DNS != Pass ||
		got.Result.Service != Fail || got.Result.Detail != r.Detail || !slices.Equal(got.Result.Peers, r.Peers) || got.Error != "" {
		t.Errorf("round trip: %+v, want %+v", got, r)
	}
}
