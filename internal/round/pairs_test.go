package round

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
)

func membersN(n int) []Member {
	members := make([]Member, n)
	for i := range members {
		members[i] = Member{Node: fmt.Sprintf("node-%04d", i), Addr: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})}
	}
	return members
}

func TestPairCoversEveryPairInSmallRounds(t *testing.T) {
	members := membersN(5)
	for _, a := range Pair(members, "r1") {
		if len(a.Peers) != 4 || len(a.Expect) != 4 {
			t.Errorf("%s tests %d peers and is tested by %d, want 4 each", a.Node, len(a.Peers), len(a.Expect))
		}
	}
}

func TestPairIsLinearAndBalancedInLargeRounds(t *testing.T) {
	for _, n := range []int{17, 100, 5000} {
		assignments := Pair(membersN(n), "r1")
		if len(assignments) != n {
			t.Fatalf("%d members: %d assignments", n, len(assignments))
		}
		received := map[netip.Addr]int{}
		expected := map[netip.Addr][]netip.Addr{}
		for _, a := range assignments {
			if len(a.Peers) != Sample {
				t.Errorf("%d members: %s tests %d peers, want %d", n, a.Node, len(a.Peers), Sample)
			}
			for _, p := range a.Peers {
				if p == a.Addr {
					t.Errorf("%s tests itself", a.Node)
				}
				received[p]++
				expected[p] = append(expected[p], a.Addr)
			}
		}
		for _, a := range assignments {
			if received[a.Addr] != Sample {
				t.Errorf("%d members: %s is tested %d times, want %d", n, a.Node, received[a.Addr], Sample)
			}
			want := slices.Clone(expected[a.Addr])
			slices.SortFunc(want, netip.Addr.Compare)
			if !slices.Equal(a.Expect, want) {
				t.Errorf("%s expects %v, is tested by %v", a.Node, a.Expect, want)
			}
		}
	}
}

func TestPairVariesWithTheSeedAndHoldsForOne(t *testing.T) {
	members := membersN(100)
	reversed := slices.Clone(members)
	slices.Reverse(reversed)
	a, b, again := Pair(members, "r1"), Pair(members, "r2"), Pair(reversed, "r1")
	same := 0
	for i := range a {
		if slices.Equal(a[i].Peers, b[i].Peers) {
			same++
		}
		if !slices.Equal(a[i].Peers, again[i].Peers) {
			t.Fatalf("%s: the same seed and members paired differently", a[i].Node)
		}
	}
	if same == len(members) {
		t.Fatal("two seeds pair the same")
	}
}

// BenchmarkPair5000 pairs a 5,000-node round.
func BenchmarkPair5000(b *testing.B) {
	members := membersN(5000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Pair(members, "r")
	}
}

func TestPairAroundTestsEveryKindOfPairBothWays(t *testing.T) {
	for _, n := range []int{4, 20, 5000} {
		members := membersN(n)
		focus := []string{members[1].Node, members[2].Node, members[3].Node}
		nodeOf := map[netip.Addr]string{}
		for _, m := range members {
			nodeOf[m.Addr] = m.Node
		}
		tested := map[[2]string]bool{}
		expected := map[[2]string]bool{}
		for _, a := range PairAround(members, focus, "r1") {
			for _, p := range a.Peers {
				tested[[2]string{a.Node, nodeOf[p]}] = true
			}
			for _, p := range a.Expect {
				expected[[2]string{nodeOf[p], a.Node}] = true
			}
		}
		if !maps.Equal(tested, expected) {
			t.Fatalf("%d members: the peers tested and the peers expected differ", n)
		}
		newOld, oldNew := 0, 0
		for pair := range tested {
			inA, inB := slices.Contains(focus, pair[0]), slices.Contains(focus, pair[1])
			switch {
			case !inA && !inB:
				t.Errorf("%d members: %v pairs two nodes outside the focus", n, pair)
			case inA && !inB:
				newOld++
				if !tested[[2]string{pair[1], pair[0]}] {
					t.Errorf("%d members: %v is not tested back", n, pair)
				}
			case !inA && inB:
				oldNew++
			}
		}
		for _, a := range focus {
			for _, b := range focus {
				if a != b && !tested[[2]string{a, b}] {
					t.Errorf("%d members: focus pair %s -> %s untested", n, a, b)
				}
			}
		}
		if want := len(focus) * min(Sample, n-len(focus)); newOld != want || oldNew != want {
			t.Errorf("%d members: %d new-old and %d old-new pairs, want %d each", n, newOld, oldNew, want)
		}
	}
}
