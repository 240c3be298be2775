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
