package probe

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/round"
)

// results is a round of n nodes in which every probe arrived and every
// extra target echoed.
func results(n int, extra []netip.Addr) round.Results[Params, Result] {
	members := make([]round.Member, n)
	for i := range members {
		members[i] = round.Member{Node: fmt.Sprintf("node-%04d", i), Addr: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})}
	}
	res := round.Results[Params, Result]{Reports: map[string]round.Report[Result]{}, Failed: map[string]string{}}
	for _, a := range round.Pair(members, "r") {
		res.Plans = append(res.Plans, round.Plan[Params]{Round: "r", Node: a.Node, Addr: a.Addr, Peers: a.Peers, Expect: a.Expect,
			Params: Params{Extra: extra}})
		res.Reports[a.Node] = round.Report[Result]{Round: "r", Node: a.Node, Stage: round.Done,
			Result: Result{Mode: ModeSocket, ReceivedFrom: a.Expect, EchoedBy: extra}}
	}
	return res
}

func TestJudge(t *testing.T) {
	extra := []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	tests := map[string]struct {
		change       func(round.Results[Params, Result])
		failing      int32
		firstFailing string
		missing      int32
	}{
		"all pass": {change: func(round.Results[Params, Result]) {}},
		"one direction dropped": {change: func(r round.Results[Params, Result]) {
			rep := r.Reports["node-0001"]
			rep.Result.ReceivedFrom = []netip.Addr{netip.MustParseAddr("10.0.0.2")} // node-0 -> node-1 lost
			r.Reports["node-0001"] = rep
		}, failing: 1, firstFailing: "node-0000 (10.0.0.0) -> node-0001 (10.0.0.1)"},
		"extra target silent": {change: func(r round.Results[Params, Result]) {
			rep := r.Reports["node-0002"]
			rep.Result.EchoedBy = nil
			r.Reports["node-0002"] = rep
		}, failing: 1, firstFailing: "node-0002 (10.0.0.2) -> 192.0.2.10 (extra target)"},
		"an agent that did not report is missing, and its peers' receipts of it are not failing pairs": {
			change: func(r round.Results[Params, Result]) {
				delete(r.Reports, "node-0002")
				for _, n := range []string{"node-0000", "node-0001"} {
					rep := r.Reports[n]
					rep.Result.ReceivedFrom = []netip.Addr{netip.MustParseAddr("10.0.0.0"), netip.MustParseAddr("10.0.0.1")}
					r.Reports[n] = rep
				}
			}, missing: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := results(3, extra)
			tc.change(res)
			st := Judge(res)
			if st.FailingPairs != tc.failing || st.MissingReports != tc.missing {
				t.Fatalf("failing %d missing %d, want %d and %d: %+v", st.FailingPairs, st.MissingReports, tc.failing, tc.missing, st)
			}
			if tc.firstFailing != "" {
				if got := st.FirstFailing[0].From + " -> " + st.FirstFailing[0].To; got != tc.firstFailing {
					t.Fatalf("first failing %q, want %q", got, tc.firstFailing)
				}
			}
			if st.PassedPairs+st.FailingPairs != st.PlannedPairs {
				t.Fatalf("passed %d + failing %d != planned %d", st.PassedPairs, st.FailingPairs, st.PlannedPairs)
			}
		})
	}
}

// TestJudgeKeepsWhyAnAgentDidNotProbe: the reports are deleted once the
// round is summed up, so what an agent said of why it could not probe is
// kept in the status, for its node only.
func TestJudgeKeepsWhyAnAgentDidNotProbe(t *testing.T) {
	res := results(4, nil)
	delete(res.Reports, "node-0001")
	delete(res.Reports, "node-0003")
	res.Failed["node-0003"] = "the agent came up 1m0s after its round began"
	st := Judge(res)
	if st.MissingReports != 2 {
		t.Fatalf("missing %d, want 2", st.MissingReports)
	}
	want := []v1alpha1.MissingReason{{Node: "node-0003", Reason: "the agent came up 1m0s after its round began"}}
	if !slices.Equal(st.MissingReasons, want) {
		t.Fatalf("missing reasons %+v, want %+v", st.MissingReasons, want)
	}
}

func TestJudgeBoundsTheLists(t *testing.T) {
	res := results(5000, nil)
	for i, p := range res.Plans {
		if i >= 4000 {
			delete(res.Reports, p.Node)
			continue
		}
		rep := res.Reports[p.Node]
		rep.Result.ReceivedFrom = nil // nothing arrives anywhere
		res.Reports[p.Node] = rep
	}
	st := Judge(res)
	if len(st.FirstFailing) != v1alpha1.MaxListed || len(st.FirstMissing) != v1alpha1.MaxListed {
		t.Fatalf("listed %d failing and %d missing, want %d each", len(st.FirstFailing), len(st.FirstMissing), v1alpha1.MaxListed)
	}
	if st.MissingReports != 1000 {
		t.Fatalf("missing %d, want 1000", st.MissingReports)
	}
}

// TestALateAgentIsStillHeard: the window is the round's, not the agent's
// own, so an agent that came up 20s into a 30s round still hears its peers
// and is heard by them; one that came up after its round's sending ended
// is heard by nobody, and reports that it came too late.
func TestALateAgentIsStillHeard(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := AgentConfig{Start: start, End: start.Add(30 * time.Second)}
	heard := func(sender, receiver time.Time) bool {
		sFrom, sUntil, _ := Window(cfg, sender)
		rFrom, _, rEnd := Window(cfg, receiver)
		return sFrom.Before(sUntil) && rFrom.Before(sUntil) && sFrom.Before(rEnd)
	}
	onTime, late := start.Add(time.Second), start.Add(20*time.Second)
	if !heard(onTime, late) || !heard(late, onTime) {
		t.Fatal("an agent 20s late into a 30s round does not hear its peers, or is not heard")
	}
	tooLate := start.Add(29 * time.Second)
	if heard(onTime, tooLate) || heard(tooLate, onTime) {
		t.Fatal("an agent that came up after the sending ended is heard, or hears")
	}
	plan := round.Plan[Params]{Start: cfg.Start, End: cfg.End}
	if _, _, err := plan.Window(tooLate, LeastWindow); err == nil {
		t.Fatal("an agent 29s into a 30s round is not told it came too late")
	}
}

// BenchmarkJudge5000 judges the reports of a 5,000-node round in which
// every probe was lost (the largest status), and reports the size of the
// status it yields.
func BenchmarkJudge5000(b *testing.B) {
	res := results(5000, []netip.Addr{netip.MustParseAddr("192.0.2.10")})
	for n, rep := range res.Reports {
		rep.Result.ReceivedFrom, rep.Result.EchoedBy = nil, nil
		res.Reports[n] = rep
	}
	var st v1alpha1.ProbeStatus
	b.ReportAllocs()
	for b.Loop() {
		st = Judge(res)
	}
	out, err := json.Marshal(st)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(out)), "status-bytes")
}
