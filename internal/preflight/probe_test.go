package preflight

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"testing"

	"github.com/winready/winready/api/v1alpha1"
)

func nodesN(n int) []ProbeNode {
	nodes := make([]ProbeNode, n)
	for i := range nodes {
		nodes[i] = ProbeNode{Name: fmt.Sprintf("node-%04d", i), IP: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})}
	}
	return nodes
}

// allReceived is the reports of a round in which every probe arrived.
func allReceived(nodes []ProbeNode, plan map[string][]netip.Addr, extra []netip.Addr) []Report {
	byIP := map[netip.Addr]string{}
	for _, n := range nodes {
		byIP[n.IP] = n.Name
	}
	received := map[string][]netip.Addr{}
	for _, n := range nodes {
		for _, p := range plan[n.Name] {
			received[byIP[p]] = append(received[byIP[p]], n.IP)
		}
	}
	reports := make([]Report, 0, len(nodes))
	for _, n := range nodes {
		reports = append(reports, Report{Node: n.Name, ReceivedFrom: received[n.Name], EchoedBy: extra})
	}
	return reports
}

func TestPlanCoversEveryPairInSmallClusters(t *testing.T) {
	nodes := nodesN(5)
	plan := Plan(nodes, "r1")
	for _, n := range nodes {
		if len(plan[n.Name]) != 4 {
			t.Errorf("%s probes %d peers, want 4", n.Name, len(plan[n.Name]))
		}
	}
}

func TestPlanIsLinearAndBalancedInLargeClusters(t *testing.T) {
	for _, n := range []int{17, 100, 5000} {
		nodes := nodesN(n)
		plan := Plan(nodes, "r1")
		sent, received := map[string]int{}, map[netip.Addr]int{}
		total := 0
		for name, peers := range plan {
			sent[name] += len(peers)
			for _, p := range peers {
				received[p]++
				total++
			}
		}
		if total != n*sampleSize {
			t.Errorf("%d nodes: %d probes planned, want %d", n, total, n*sampleSize)
		}
		for _, node := range nodes {
			if sent[node.Name] != sampleSize || received[node.IP] != sampleSize {
				t.Errorf("%d nodes: %s sends %d and receives %d, want %d each", n, node.Name, sent[node.Name], received[node.IP], sampleSize)
			}
			for _, p := range plan[node.Name] {
				if p == node.IP {
					t.Errorf("%s probes itself", node.Name)
				}
			}
		}
	}
}

func TestPlanVariesWithTheRound(t *testing.T) {
	nodes := nodesN(100)
	a, b := Plan(nodes, "r1"), Plan(nodes, "r2")
	same := 0
	for name := range a {
		if fmt.Sprint(a[name]) == fmt.Sprint(b[name]) {
			same++
		}
	}
	if same == len(nodes) {
		t.Fatal("two rounds probe the same pairs")
	}
}

func TestAggregate(t *testing.T) {
	nodes := nodesN(3)
	extra := []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	plan := Plan(nodes, "r")
	tests := map[string]struct {
		reports      func() []Report
		failing      int32
		firstFailing string
		missing      int32
	}{
		"all pass": {reports: func() []Report { return allReceived(nodes, plan, extra) }},
		"one direction dropped": {reports: func() []Report {
			r := allReceived(nodes, plan, extra)
			r[1].ReceivedFrom = []netip.Addr{nodes[2].IP} // node-0 -> node-1 lost
			return r
		}, failing: 1, firstFailing: "node-0000 (10.0.0.0) -> node-0001 (10.0.0.1)"},
		"extra target silent": {reports: func() []Report {
			r := allReceived(nodes, plan, extra)
			r[2].EchoedBy = nil
			return r
		}, failing: 1, firstFailing: "node-0002 (10.0.0.2) -> 192.0.2.10 (extra target)"},
		"an agent never reported": {reports: func() []Report {
			return allReceived(nodes, plan, extra)[:2]
		}, missing: 1},
		"an agent that never ran is silent, not failing pairs": {reports: func() []Report {
			sent := maps.Clone(plan)
			delete(sent, nodes[2].Name) // it sent nothing either
			return allReceived(nodes, sent, extra)[:2]
		}, missing: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := Aggregate(nodes, plan, extra, tc.reports())
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

func TestAggregateBoundsTheLists(t *testing.T) {
	nodes := nodesN(5000)
	plan := Plan(nodes, "r")
	reports := allReceived(nodes, plan, nil)
	for i := range reports {
		reports[i].ReceivedFrom = nil // nothing arrives anywhere
	}
	st := Aggregate(nodes, plan, nil, reports[:4000])
	if len(st.FirstFailing) != 20 || len(st.FirstMissing) != 20 {
		t.Fatalf("listed %d failing and %d missing, want 20 each", len(st.FirstFailing), len(st.FirstMissing))
	}
	if st.MissingReports != 1000 {
		t.Fatalf("missing %d, want 1000", st.MissingReports)
	}
}

// BenchmarkAggregate5000 aggregates the reports of a 5,000-node round in
// which every probe was lost (the largest status), and reports the size of
// the status it yields.
func BenchmarkAggregate5000(b *testing.B) {
	nodes := nodesN(5000)
	extra := []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	plan := Plan(nodes, "r")
	reports := allReceived(nodes, plan, nil)
	for i := range reports {
		reports[i].ReceivedFrom = nil
	}
	var st v1alpha1.ProbeStatus
	b.ReportAllocs()
	for b.Loop() {
		st = Aggregate(nodes, plan, extra, reports)
	}
	out, err := json.Marshal(st)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(out)), "status-bytes")
}

// BenchmarkPlan5000 plans a 5,000-node round.
func BenchmarkPlan5000(b *testing.B) {
	nodes := nodesN(5000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Plan(nodes, "r")
	}
}
