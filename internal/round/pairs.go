package round

import (
	"cmp"
	"hash/fnv"
	"net/netip"
	"slices"
)

// AllPairsMax is the largest round in which every agent tests every other.
// Above it each tests Sample peers, so that the pairs grow as N.
const (
	AllPairsMax = 16
	Sample      = 3
)

// Assignment is one member's part of a pairing: the peers it tests, and
// those that test it.
type Assignment struct {
	Member
	Peers  []netip.Addr
	Expect []netip.Addr
}

// Pair chooses the peers each member tests. In a small round that is every
// other member. In a large one the members are put in an order shuffled by
// seed and each tests the Sample members after it (in a ring), so that each
// tests and is tested Sample times, and rounds with the same seed and
// members test the same pairs (a pod network check round after a step
// compares pair by pair with the baseline's). Assignments are sorted by
// node.
func Pair(members []Member, seed string) []Assignment {
	order := slices.Clone(members)
	slices.SortFunc(order, func(a, b Member) int { return cmp.Compare(a.Node, b.Node) })
	if len(order) > AllPairsMax {
		keys := make(map[string]uint64, len(order))
		for _, m := range order {
			h := fnv.New64a()
			_, _ = h.Write([]byte(seed))
			_, _ = h.Write([]byte(m.Node))
			keys[m.Node] = h.Sum64()
		}
		slices.SortStableFunc(order, func(a, b Member) int { return cmp.Compare(keys[a.Node], keys[b.Node]) })
	}
	peers := make(map[string][]int, len(order))
	expect := make(map[string][]netip.Addr, len(order))
	for i, m := range order {
		var mine []int
		if len(order) <= AllPairsMax {
			for j := range order {
				if j != i {
					mine = append(mine, j)
				}
			}
		} else {
			for k := 1; k <= Sample; k++ {
				mine = append(mine, (i+k)%len(order))
			}
		}
		peers[m.Node] = mine
		for _, j := range mine {
			expect[order[j].Node] = append(expect[order[j].Node], m.Addr)
		}
	}
	out := make([]Assignment, 0, len(order))
	for _, m := range order {
		a := Assignment{Member: m, Expect: expect[m.Node]}
		for _, j := range peers[m.Node] {
			a.Peers = append(a.Peers, order[j].Addr)
		}
		slices.SortFunc(a.Expect, netip.Addr.Compare)
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Assignment) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// PairAround pairs a round around focus, the members a change reached
// first: each focus member tests every other focus member (up to
// AllPairsMax of them) and Sample of the others, chosen by seed, and those
// test it back, so that every pair is tested both ways: new to new, new to
// old and old to new. A member neither in focus nor chosen tests nothing.
// Assignments are sorted by node.
func PairAround(members []Member, focus []string, seed string) []Assignment {
	inFocus := make(map[string]bool, len(focus))
	for _, n := range focus {
		inFocus[n] = true
	}
	var near, far []Member
	for _, m := range members {
		if inFocus[m.Node] {
			near = append(near, m)
		} else {
			far = append(far, m)
		}
	}
	key := func(m Member) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(seed))
		_, _ = h.Write([]byte(m.Node))
		return h.Sum64()
	}
	slices.SortFunc(near, func(a, b Member) int { return cmp.Compare(a.Node, b.Node) })
	slices.SortFunc(far, func(a, b Member) int { return cmp.Or(cmp.Compare(key(a), key(b)), cmp.Compare(a.Node, b.Node)) })
	tests := map[string][]netip.Addr{}
	expect := map[string][]netip.Addr{}
	both := func(a, b Member) {
		tests[a.Node] = append(tests[a.Node], b.Addr)
		expect[b.Node] = append(expect[b.Node], a.Addr)
	}
	for i, a := range near {
		for j, b := range near {
			if i != j && i < AllPairsMax && j < AllPairsMax {
				both(a, b)
			}
		}
		// Each focus member takes the Sample far members after the ones
		// the previous took, so that the old nodes tested vary.
		for k := range min(Sample, len(far)) {
			b := far[(i*Sample+k)%len(far)]
			both(a, b)
			both(b, a)
		}
	}
	out := make([]Assignment, 0, len(members))
	for _, m := range members {
		a := Assignment{Member: m, Peers: tests[m.Node], Expect: expect[m.Node]}
		slices.SortFunc(a.Peers, netip.Addr.Compare)
		slices.SortFunc(a.Expect, netip.Addr.Compare)
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Assignment) int { return cmp.Compare(a.Node, b.Node) })
	return out
}
