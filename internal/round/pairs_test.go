package round

import (
	"fmt"
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
