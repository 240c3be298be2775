package preflight

import (
	"cmp"
	"hash/fnv"
	"net/netip"
	"slices"

	"github.com/winready/winready/api/v1alpha1"
)

// allPairsMax is the largest cluster in which every node probes every other.
// Above it each node probes sampleSize peers, so the total stays O(N).
const (
	allPairsMax = 16
	sampleSize  = 3
)

// ProbeNode is a Linux node taking part in a probe round.
type ProbeNode struct {
	Name string
	IP   netip.Addr
}

// Plan chooses the peers each node probes, by node name. In a small cluster
// that is every other node. In a large one the nodes are put in an order
// shuffled by the round and each probes the sampleSize nodes after it (in a
// ring), so that every node sends and receives exactly sampleSize probes and
// each round looks at other pairs.
func Plan(nodes []ProbeNode, round string) map[string][]netip.Addr {
	plan := make(map[string][]netip.Addr, len(nodes))
	if len(nodes) <= allPairsMax {
		for _, n := range nodes {
			peers := make([]netip.Addr, 0, len(nodes)-1)
			for _, p := range nodes {
				if p.Name != n.Name {
					peers = append(peers, p.IP)
				}
			}
			plan[n.Name] = peers
		}
		return plan
	}
	order := slices.Clone(nodes)
	keys := make(map[string]uint64, len(order))
	for _, n := range order {
		h := fnv.New64a()
		_, _ = h.Write([]byte(round))
		_, _ = h.Write([]byte(n.Name))
		keys[n.Name] = h.Sum64()
	}
	slices.SortFunc(order, func(a, b ProbeNode) int {
		return cmp.Or(cmp.Compare(keys[a.Name], keys[b.Name]), cmp.Compare(a.Name, b.Name))
	})
	for i, n := range order {
		peers := make([]netip.Addr, 0, sampleSize)
		for k := 1; k <= sampleSize; k++ {
			peers = append(peers, order[(i+k)%len(order)].IP)
		}
		plan[n.Name] = peers
	}
	return plan
}

// Report is what one node's agent saw in a round.
type Report struct {
	Node         string
	ReceivedFrom []netip.Addr
	EchoedBy     []netip.Addr
}

// Aggregate checks every planned pair against the reports: a pair passes
// when the receiving node reported the sender's probe (or, for an extra
// target, when the sender got its echo). Lists in the result are bounded.
func Aggregate(nodes []ProbeNode, plan map[string][]netip.Addr, extra []netip.Addr, reports []Report) v1alpha1.ProbeStatus {
	byIP := make(map[netip.Addr]ProbeNode, len(nodes))
	for _, n := range nodes {
		byIP[n.IP] = n
	}
	got := make(map[string]*Report, len(reports))
	for i := range reports {
		got[reports[i].Node] = &reports[i]
	}
	var st v1alpha1.ProbeStatus
	st.Nodes = int32(len(nodes))
	// Labels are built only for the pairs listed, not for every failure.
	fail := func(from, to func() string) {
		st.FailingPairs++
		if len(st.FirstFailing) < v1alpha1.MaxListed {
			st.FirstFailing = append(st.FirstFailing, v1alpha1.ProbePair{From: from(), To: to()})
		}
	}
	// Sorted for a stable status: the same outcome writes the same object.
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b ProbeNode) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range sorted {
		mine := got[n.Name]
		if mine == nil {
			// An agent that never ran sent nothing: it is silent, and its
			// peers' missing receipts are not failing pairs.
			st.MissingReports++
			if len(st.FirstMissing) < v1alpha1.MaxListed {
				st.FirstMissing = append(st.FirstMissing, n.Name)
			}
			continue
		}
		for _, peerIP := range plan[n.Name] {
			peer := byIP[peerIP]
			theirs := got[peer.Name]
			if theirs == nil {
				continue // counted as a missing report, not as a failing pair
			}
			st.PlannedPairs++
			if slices.Contains(theirs.ReceivedFrom, n.IP) {
				st.PassedPairs++
			} else {
				fail(func() string { return label(n) }, func() string { return label(peer) })
			}
		}
		for _, e := range extra {
			st.PlannedPairs++
			if slices.Contains(mine.EchoedBy, e) {
				st.PassedPairs++
			} else {
				fail(func() string { return label(n) }, func() string { return e.String() + " (extra target)" })
			}
		}
	}
	return st
}

func label(n ProbeNode) string { return n.Name + " (" + n.IP.String() + ")" }
