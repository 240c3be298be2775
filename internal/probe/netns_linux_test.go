package probe

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/winready/winready/internal/netnstest"
)

// These tests send real packets between network namespaces joined by veths
// and a bridge (all inside namespaces the test makes), as root.

type testbed struct {
	t      *testing.T
	prefix string
	nodes  []string // namespace names
	addrs  []netip.Addr
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// netnsTools are the commands the tests run: iproute2, nftables and ping.
var netnsTools = []string{"ip", "nft", "ping"}

// requireNetns skips the test when it cannot make network namespaces (see
// netnstest.Require).
func requireNetns(t *testing.T) {
	t.Helper()
	netnstest.Require(t, netnsTools...)
}

func newTestbed(t *testing.T, n int) *testbed {
	requireNetns(t)
	b := &testbed{t: t, prefix: fmt.Sprintf("wr%d", os.Getpid()%100000)}
	bridgeNS := b.prefix + "-br"
	run(t, "ip", "netns", "add", bridgeNS)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", bridgeNS).Run() })
	run(t, "ip", "-n", bridgeNS, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", bridgeNS, "link", "set", "br0", "up")
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("%s-n%d", b.prefix, i)
		addr := netip.AddrFrom4([4]byte{10, 250, 0, byte(i)})
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		port := fmt.Sprintf("p%d", i)
		run(t, "ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", bridgeNS)
		run(t, "ip", "-n", bridgeNS, "link", "set", port, "master", "br0", "up")
		run(t, "ip", "-n", ns, "addr", "add", addr.String()+"/24", "dev", "eth0")
		run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		b.nodes = append(b.nodes, ns)
		b.addrs = append(b.addrs, addr)
	}
	return b
}

// inNS runs f on a thread inside namespace ns; sockets f opens stay there.
func inNS(t *testing.T, ns string, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		// The thread is left locked, so it ends with the goroutine rather
		// than go back to the pool in another namespace.
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

func others(addrs []netip.Addr, self netip.Addr) []netip.Addr {
	return slices.DeleteFunc(slices.Clone(addrs), func(a netip.Addr) bool { return a == self })
}

// round runs one agent in each of the given namespaces, probing every other
// node and the extra targets, and returns their results by node address.
func (b *testbed) round(nodes []int, extra []netip.Addr) map[netip.Addr]Result {
	return b.roundWith(nodes, extra, nil)
}

// roundWith is round, with during run alongside the agents (given the
// round's ID and secret) until they end.
func (b *testbed) roundWith(nodes []int, extra []netip.Addr, during func(ctx context.Context, round [16]byte, secret []byte)) map[netip.Addr]Result {
	round := [16]byte{byte(time.Now().UnixNano())}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		b.t.Fatal(err)
	}
	var peers []netip.Addr
	for _, i := range nodes {
		peers = append(peers, b.addrs[i])
	}
	agents := map[netip.Addr]*Agent{}
	for _, i := range nodes {
		cfg := AgentConfig{Round: round, Secret: secret, NodeIP: b.addrs[i], Peers: others(peers, b.addrs[i]), Extra: extra,
			Duration: 1500 * time.Millisecond, Interval: 100 * time.Millisecond}
		if err := inNS(b.t, b.nodes[i], func() error {
			a, err := Open(cfg)
			agents[cfg.NodeIP] = a
			return err
		}); err != nil {
			b.t.Fatalf("opening the agent in %s: %v", b.nodes[i], err)
		}
	}
	results := map[netip.Addr]Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	var alongside sync.WaitGroup
	if during != nil {
		alongside.Go(func() { during(ctx, round, secret) })
	}
	defer func() { cancel(); alongside.Wait() }()
	for addr, a := range agents {
		wg.Go(func() {
			r := a.Run(context.Background(), nil)
			mu.Lock()
			results[addr] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, i := range nodes {
		r := results[b.addrs[i]]
		b.t.Logf("%s (%s, %s): received from %v, echoed by %v", b.nodes[i], b.addrs[i], r.Mode, r.ReceivedFrom, r.EchoedBy)
	}
	return results
}

func TestEveryPairPasses(t *testing.T) {
	b := newTestbed(t, 3)
	results := b.round([]int{0, 1, 2}, nil)
	for _, addr := range b.addrs {
		if got, want := results[addr].ReceivedFrom, others(b.addrs, addr); !slices.Equal(got, want) {
			t.Errorf("%s received from %v, want %v", addr, got, want)
		}
		if results[addr].Mode != ModeSocket {
			t.Errorf("%s: mode %s, want %s where nothing owns UDP %d", addr, results[addr].Mode, ModeSocket, Port)
		}
	}
}

func TestDroppedPairFailsAlone(t *testing.T) {
	b := newTestbed(t, 3)
	// Drop UDP 4789 from node 1 at node 2's input, and nothing else.
	ns2 := b.nodes[1]
	run(t, "ip", "netns", "exec", ns2, "nft", "add", "table", "inet", "wrtest")
	run(t, "ip", "netns", "exec", ns2, "nft", "add", "chain", "inet", "wrtest", "input",
		"{ type filter hook input priority 0 ; }")
	run(t, "ip", "netns", "exec", ns2, "nft", "add", "rule", "inet", "wrtest", "input",
		"ip", "saddr", b.addrs[0].String(), "udp", "dport", "4789", "drop")

	failing := b.failingPairs(b.round([]int{0, 1, 2}, nil))
	t.Logf("failing pairs: %v", failing)
	if want := []string{b.addrs[0].String() + " -> " + b.addrs[1].String()}; !slices.Equal(failing, want) {
		t.Fatalf("failing pairs %v, want exactly %v", failing, want)
	}
}

// addVXLAN gives every node a vxlan.calico on port 4789 with VNI 4096, each
// knowing the others as flood destinations, as Calico in VXLANCrossSubnet mode.
func (b *testbed) addVXLAN() {
	t := b.t
	for i, ns := range b.nodes {
		run(t, "ip", "-n", ns, "link", "add", "vxlan.calico", "type", "vxlan", "id", "4096", "dstport", "4789",
			"local", b.addrs[i].String(), "dev", "eth0")
		run(t, "ip", "-n", ns, "addr", "add", fmt.Sprintf("10.251.0.%d/24", i+1), "dev", "vxlan.calico")
		run(t, "ip", "-n", ns, "link", "set", "vxlan.calico", "up")
		for _, peer := range others(b.addrs, b.addrs[i]) {
			run(t, "bridge", "-n", ns, "fdb", "append", "00:00:00:00:00:00", "dev", "vxlan.calico", "dst", peer.String())
		}
	}
}

func TestLiveVXLANDeviceOwnsThePort(t *testing.T) {
	b := newTestbed(t, 3)
	b.addVXLAN()
	ping := func() {
		t.Helper()
		run(t, "ip", "netns", "exec", b.nodes[0], "ping", "-c", "1", "-W", "2", "10.251.0.2")
	}
	ping()

	results := b.round([]int{0, 1, 2}, nil)
	for _, addr := range b.addrs {
		r := results[addr]
		if r.Mode != ModeCapture {
			t.Errorf("%s: mode %s, want %s: the kernel owns UDP %d", addr, r.Mode, ModeCapture, Port)
		}
		if want := others(b.addrs, addr); !slices.Equal(r.ReceivedFrom, want) {
			t.Errorf("%s received from %v, want %v", addr, r.ReceivedFrom, want)
		}
	}
	ping() // the overlay still carries traffic after the probes
}

func TestResponderEchoes(t *testing.T) {
	b := newTestbed(t, 3)
	responder := b.addrs[2]
	var conn *net.UDPConn
	if err := inNS(t, b.nodes[2], func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: Port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Respond(ctx, conn, nil) }()
	results := b.round([]int{0, 1}, []netip.Addr{responder})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, addr := range b.addrs[:2] {
		if got := results[addr].EchoedBy; !slices.Equal(got, []netip.Addr{responder}) {
			t.Errorf("%s echoed by %v, want %v", addr, got, responder)
		}
	}
}

// failingPairs lists the ordered pairs whose probes did not arrive.
func (b *testbed) failingPairs(results map[netip.Addr]Result) []string {
	var failing []string
	for _, from := range b.addrs {
		for _, to := range others(b.addrs, from) {
			if !slices.Contains(results[to].ReceivedFrom, from) {
				failing = append(failing, from.String()+" -> "+to.String())
			}
		}
	}
	return failing
}

func TestDroppedPathSeenWhileVXLANOwnsThePort(t *testing.T) {
	b := newTestbed(t, 3)
	b.addVXLAN()
	// A firewall on the path between node 1 and node 3 (in the bridge), as a
	// security group would be. A capture on the receiving node sees packets
	// before its own netfilter hooks, so the path is where it detects drops.
	br := b.prefix + "-br"
	run(t, "ip", "netns", "exec", br, "nft", "add", "table", "bridge", "wrtest")
	run(t, "ip", "netns", "exec", br, "nft", "add", "chain", "bridge", "wrtest", "forward",
		"{ type filter hook forward priority 0 ; }")
	run(t, "ip", "netns", "exec", br, "nft", "add", "rule", "bridge", "wrtest", "forward",
		"ip", "saddr", b.addrs[0].String(), "ip", "daddr", b.addrs[2].String(), "udp", "dport", "4789", "drop")

	failing := b.failingPairs(b.round([]int{0, 1, 2}, nil))
	t.Logf("failing pairs: %v", failing)
	if want := []string{b.addrs[0].String() + " -> " + b.addrs[2].String()}; !slices.Equal(failing, want) {
		t.Fatalf("failing pairs %v, want exactly %v", failing, want)
	}
}

// forge sends, from namespace ns until ctx ends, probes that claim to come
// from from to to, from the outer source address src (another node's
// address, which a transparent socket sends from without owning it).
func (b *testbed) forge(ctx context.Context, ns string, src, from, to netip.Addr, round [16]byte, secret []byte) {
	t := b.t
	var conn *net.UDPConn
	if err := inNS(t, ns, func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
			}); err != nil {
				return err
			}
			return serr
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp4", netip.AddrPortFrom(src, 0).String())
		if err == nil {
			conn = pc.(*net.UDPConn)
		}
		return err
	}); err != nil {
		t.Errorf("opening the forger's socket in %s: %v", ns, err)
		return
	}
	defer conn.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for seq := uint32(0); ; seq++ {
		p := Packet{Kind: KindProbe, Round: round, From: from, To: to, Seq: seq}
		if secret != nil {
			p.Sign(secret)
		}
		if _, err := conn.WriteToUDPAddrPort(p.Marshal(), netip.AddrPortFrom(to, Port)); err != nil {
			t.Errorf("forging a probe: %v", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func TestForgedProbesFromAThirdNamespaceAreNotCounted(t *testing.T) {
	b := newTestbed(t, 3)
	// The path from node 1 to node 2 is broken (in the bridge, by port, so
	// that a packet from node 3 claiming node 1's address still passes).
	br := b.prefix + "-br"
	run(t, "ip", "netns", "exec", br, "nft", "add", "table", "bridge", "wrtest")
	run(t, "ip", "netns", "exec", br, "nft", "add", "chain", "bridge", "wrtest", "forward",
		"{ type filter hook forward priority 0 ; }")
	run(t, "ip", "netns", "exec", br, "nft", "add", "rule", "bridge", "wrtest", "forward",
		"iifname", "p1", "oifname", "p2", "udp", "dport", "4789", "drop")
	victim, claimed, forger := b.addrs[1], b.addrs[0], b.nodes[2]
	broken := []string{claimed.String() + " -> " + victim.String()}
	pairs := func(results map[netip.Addr]Result) []string {
		var failing []string
		for _, pair := range [][2]netip.Addr{{claimed, victim}, {victim, claimed}} {
			if !slices.Contains(results[pair[1]].ReceivedFrom, pair[0]) {
				failing = append(failing, pair[0].String()+" -> "+pair[1].String())
			}
		}
		return failing
	}

	// The round ID is public; the secret is not. The forger sends from its
	// own address, and from the claimed node's address.
	results := b.roundWith([]int{0, 1}, nil, func(ctx context.Context, round [16]byte, _ []byte) {
		var wg sync.WaitGroup
		wg.Go(func() { b.forge(ctx, forger, b.addrs[2], claimed, victim, round, nil) })
		wg.Go(func() { b.forge(ctx, forger, claimed, claimed, victim, round, []byte("a guessed secret")) })
		wg.Wait()
	})
	if failing := pairs(results); !slices.Equal(failing, broken) {
		t.Fatalf("failing pairs %v, want exactly %v: forged probes were counted", failing, broken)
	}

	// A probe signed with the round's secret but sent from another address
	// is not counted either.
	results = b.roundWith([]int{0, 1}, nil, func(ctx context.Context, round [16]byte, secret []byte) {
		b.forge(ctx, forger, b.addrs[2], claimed, victim, round, secret)
	})
	if failing := pairs(results); !slices.Equal(failing, broken) {
		t.Fatalf("failing pairs %v, want exactly %v: a probe from another address was counted", failing, broken)
	}

	// The forger's spoofed packets do reach the victim: with the secret they
	// would count, so it is the secret that keeps them out above.
	results = b.roundWith([]int{0, 1}, nil, func(ctx context.Context, round [16]byte, secret []byte) {
		b.forge(ctx, forger, claimed, claimed, victim, round, secret)
	})
	if failing := pairs(results); len(failing) != 0 {
		t.Fatalf("failing pairs %v: the spoofed, signed probes did not reach %s, so the test proves nothing", failing, victim)
	}
}

// TestAnAgentReportsOnceItHeardEveryNodeItExpects: in a window of a
// minute, each agent reports as soon as every node expected to probe it was
// heard, and goes on probing for the others until stopped.
func TestAnAgentReportsOnceItHeardEveryNodeItExpects(t *testing.T) {
	b := newTestbed(t, 3)
	round := [16]byte{byte(time.Now().UnixNano()), 1}
	secret := []byte("the round's secret, 32 bytes....")
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan Result, 3)
	var wg sync.WaitGroup
	for i, addr := range b.addrs {
		cfg := AgentConfig{Round: round, Secret: secret, NodeIP: addr, Peers: others(b.addrs, addr), Expect: others(b.addrs, addr),
			Start: start, End: start.Add(time.Minute), Interval: 100 * time.Millisecond}
		var a *Agent
		if err := inNS(t, b.nodes[i], func() (err error) { a, err = Open(cfg); return err }); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { a.Run(ctx, func(r Result) { reports <- r }) })
	}
	for range b.addrs {
		select {
		case r := <-reports:
			if len(r.ReceivedFrom) != 2 {
				t.Errorf("a report with %v, before every expected node was heard", r.ReceivedFrom)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no report 20s into a window of a minute: the agents wait for its end")
		}
	}
	cancel()
	wg.Wait()
}
