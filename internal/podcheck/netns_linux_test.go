package podcheck

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/winready/winready/internal/netnstest"
	"github.com/winready/winready/internal/round"
)

// These tests build three "nodes" as network namespaces on an underlay
// bridge, with the VXLAN overlay Felix writes between them (vxlan.calico,
// a /26 route per peer block via the peer's tunnel address onlink, static
// ARP and FDB entries), a pod on a bridge in each node, a Service emulated
// with nftables DNAT and a DNS server. Each pod runs this package's checks
// in a process of its own inside the pod's namespace, as root.

const (
	nodeCount  = 3
	podMTU     = 1450
	nodeMTU    = 1500
	serviceIP  = "10.96.0.10"
	dnsAddress = "10.96.0.53"
	// dnsServer is on the last node's pod network, reached over the overlay
	// from the other nodes.
	dnsServer = "10.244.3.1"
)

type overlay struct {
	t      *testing.T
	prefix string
	nodes  []string // node namespace names
	pods   []string // pod namespace names
	under  []netip.Addr
	podIPs []netip.Addr
}

func (o *overlay) bridgeNS() string { return o.prefix + "-br" }
func nodeName(i int) string         { return fmt.Sprintf("node-%d", i+1) }

func sh(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (o *overlay) netns(name string) {
	sh(o.t, "ip", "netns", "add", name)
	o.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
}

func newOverlay(t *testing.T) *overlay {
	netnstest.Require(t, "ip", "bridge", "nft", "ping")
	o := &overlay{t: t, prefix: fmt.Sprintf("pc%d", os.Getpid()%100000)}
	o.netns(o.bridgeNS())
	sh(t, "ip", "-n", o.bridgeNS(), "link", "add", "br0", "type", "bridge")
	sh(t, "ip", "-n", o.bridgeNS(), "link", "set", "br0", "up")
	for i := range nodeCount {
		o.addNode(i)
	}
	for i := range nodeCount {
		o.addRoutes(i)
	}
	o.addService()
	return o
}

func tunnelAddr(i int) string { return fmt.Sprintf("10.244.%d.0", i+1) }
func vtepMAC(i int) string    { return fmt.Sprintf("66:0a:f4:00:00:%02x", i+1) }

// addNode makes node i: underlay address, vxlan.calico with the node's
// tunnel address, and a pod on a bridge holding the block's gateway.
func (o *overlay) addNode(i int) {
	t := o.t
	ns, pod := fmt.Sprintf("%s-n%d", o.prefix, i+1), fmt.Sprintf("%s-p%d", o.prefix, i+1)
	under := netip.AddrFrom4([4]byte{10, 250, 0, byte(i + 1)})
	podIP := netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 2})
	o.netns(ns)
	o.netns(pod)
	sh(t, "ip", "-n", ns, "link", "add", "eth0", "mtu", fmt.Sprint(nodeMTU), "type", "veth", "peer", "name", fmt.Sprintf("u%d", i+1), "netns", o.bridgeNS())
	sh(t, "ip", "-n", o.bridgeNS(), "link", "set", fmt.Sprintf("u%d", i+1), "master", "br0", "up")
	sh(t, "ip", "-n", ns, "addr", "add", under.String()+"/24", "dev", "eth0")
	for _, dev := range []string{"lo", "eth0"} {
		sh(t, "ip", "-n", ns, "link", "set", dev, "up")
	}
	sh(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	// Felix: vxlan.calico, VNI 4096, port 4789, no learning, MTU 50 below the node's.
	sh(t, "ip", "-n", ns, "link", "add", "vxlan.calico", "mtu", fmt.Sprint(podMTU), "address", vtepMAC(i), "type", "vxlan",
		"id", "4096", "dstport", "4789", "local", under.String(), "dev", "eth0", "nolearning")
	sh(t, "ip", "-n", ns, "addr", "add", tunnelAddr(i)+"/32", "dev", "vxlan.calico")
	sh(t, "ip", "-n", ns, "link", "set", "vxlan.calico", "up")
	// The pod, on a bridge that holds its block's gateway.
	sh(t, "ip", "-n", ns, "link", "add", "cbr0", "mtu", fmt.Sprint(podMTU), "type", "bridge")
	sh(t, "ip", "-n", ns, "addr", "add", fmt.Sprintf("10.244.%d.1/26", i+1), "dev", "cbr0")
	sh(t, "ip", "-n", ns, "link", "set", "cbr0", "up")
	sh(t, "ip", "-n", pod, "link", "add", "eth0", "mtu", fmt.Sprint(podMTU), "type", "veth", "peer", "name", "cali0", "netns", ns)
	sh(t, "ip", "-n", ns, "link", "set", "cali0", "mtu", fmt.Sprint(podMTU), "master", "cbr0", "up")
	sh(t, "ip", "-n", pod, "addr", "add", podIP.String()+"/26", "dev", "eth0")
	for _, dev := range []string{"lo", "eth0"} {
		sh(t, "ip", "-n", pod, "link", "set", dev, "up")
	}
	sh(t, "ip", "-n", pod, "route", "add", "default", "via", fmt.Sprintf("10.244.%d.1", i+1))
	// What the check pods' spec asks for: ICMP sockets without a capability.
	sh(t, "ip", "netns", "exec", pod, "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647")
	o.nodes, o.pods = append(o.nodes, ns), append(o.pods, pod)
	o.under, o.podIPs = append(o.under, under), append(o.podIPs, podIP)
}

// addRoutes writes, on node i, what Felix writes for every other node j: a
// route to j's block via j's tunnel address, onlink; a permanent ARP entry
// for that address; and an FDB entry sending j's VTEP MAC to j's address.
func (o *overlay) addRoutes(i int) {
	ns := o.nodes[i]
	for j := range nodeCount {
		if j == i {
			continue
		}
		sh(o.t, "ip", "-n", ns, "neigh", "add", tunnelAddr(j), "lladdr", vtepMAC(j), "dev", "vxlan.calico", "nud", "permanent")
		sh(o.t, "bridge", "-n", ns, "fdb", "add", vtepMAC(j), "dev", "vxlan.calico", "dst", o.under[j].String(), "self", "permanent")
		sh(o.t, "ip", "-n", ns, "route", "add", fmt.Sprintf("10.244.%d.0/26", j+1), "via", tunnelAddr(j), "dev", "vxlan.calico", "onlink")
	}
}

// addService plays kube-proxy on every node: the Service ClusterIP goes to
// a pod on another node (a backend on the node itself needs hairpin
// masquerading, which is not what is tested), and the DNS address to the
// DNS server.
func (o *overlay) addService() {
	for i, ns := range o.nodes {
		var backends []string
		for j, ip := range o.podIPs {
			if j != i {
				backends = append(backends, fmt.Sprintf("%d : %s", len(backends), ip))
			}
		}
		nft := func(args ...string) { sh(o.t, append([]string{"ip", "netns", "exec", ns, "nft"}, args...)...) }
		nft("add", "table", "ip", "kubeproxy")
		nft("add", "chain", "ip", "kubeproxy", "pre", "{ type nat hook prerouting priority -100 ; }")
		nft("add", "rule", "ip", "kubeproxy", "pre", "ip", "daddr", serviceIP, "tcp", "dport", fmt.Sprint(Port),
			"dnat", "to", "numgen", "random", "mod", fmt.Sprint(len(backends)), "map", "{ "+strings.Join(backends, ", ")+" }")
		nft("add", "rule", "ip", "kubeproxy", "pre", "ip", "daddr", dnsAddress, "udp", "dport", "53", "dnat", "to", dnsServer)
	}
}

// serveDNS starts a DNS server on the last node's pod network, in a
// process of its own inside that node's namespace.
func (o *overlay) serveDNS() {
	cmd := exec.Command("ip", "netns", "exec", o.nodes[nodeCount-1], os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dnsHelperEnv+"="+dnsServer+":53")
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		o.t.Fatal(err)
	}
	o.t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "serving\n" {
		o.t.Fatalf("DNS server: %q, %v", line, err)
	}
}

// runDNS answers every A question with the kubernetes Service's address, as
// kube-dns does for kubernetes.default, until its input closes.
func runDNS(addr string) int {
	conn, err := net.ListenPacket("udp4", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("serving")
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); _ = conn.Close() }()
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return 0
		}
		var m dnsmessage.Message
		if m.Unpack(buf[:n]) != nil || len(m.Questions) == 0 {
			continue
		}
		m.Response, m.Authoritative = true, true
		if q := m.Questions[0]; q.Type == dnsmessage.TypeA {
			m.Answers = []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: q.Class, TTL: 5},
				Body: &dnsmessage.AResource{A: [4]byte{10, 96, 0, 1}}}}
		}
		if out, err := m.Pack(); err == nil {
			_, _ = conn.WriteTo(out, from)
		}
	}
}

// helperConfig is what a pod's check process is given.
type helperConfig struct {
	PodIP   netip.Addr
	Peers   []netip.Addr
	Service netip.AddrPort
	DNS     string
}

// The test binary plays a check pod or the DNS server when these are set.
const (
	helperEnv    = "WINREADY_PODCHECK_HELPER"
	dnsHelperEnv = "WINREADY_PODCHECK_DNS"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(helperEnv); cfg != "" {
		os.Exit(runHelper(cfg))
	}
	if addr := os.Getenv(dnsHelperEnv); addr != "" {
		os.Exit(runDNS(addr))
	}
	os.Exit(m.Run())
}

// runHelper is a check pod: it serves the echo, says so, runs its checks
// when told, prints the result and serves until its input closes.
func runHelper(raw string) int {
	var hc helperConfig
	if err := json.Unmarshal([]byte(raw), &hc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp4", fmt.Sprintf(":%d", Port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = Serve(ctx, ln) }()
	fmt.Println("serving")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return 1
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", hc.DNS)
	}}
	res := Run(ctx, Config{PodIP: hc.PodIP, Peers: hc.Peers, Service: hc.Service, DNSName: DNSName, Resolver: resolver,
		Timeout: time.Second, Attempts: 2})
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// round runs a check pod in every pod namespace, each testing every other
// pod, and returns the pairs by node name with each pod's DNS and Service
// outcome.
func (o *overlay) round() Summary {
	return o.roundOf(round.Pair(o.members(), "all"))
}

// members are the pods of the overlay as a round pairs them.
func (o *overlay) members() []round.Member {
	members := make([]round.Member, nodeCount)
	for i := range nodeCount {
		members[i] = round.Member{Node: nodeName(i), Addr: o.podIPs[i]}
	}
	return members
}

// roundOf runs a check pod in every pod namespace, each testing the peers
// its assignment names.
func (o *overlay) roundOf(assignments []round.Assignment) Summary {
	t := o.t
	peers := map[string][]netip.Addr{}
	for _, a := range assignments {
		peers[a.Node] = a.Peers
	}
	type pod struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	pods := make([]pod, nodeCount)
	for i := range nodeCount {
		hc, _ := json.Marshal(helperConfig{PodIP: o.podIPs[i], Peers: peers[nodeName(i)],
			Service: netip.MustParseAddrPort(fmt.Sprintf("%s:%d", serviceIP, Port)), DNS: dnsAddress + ":53"})
		cmd := exec.Command("ip", "netns", "exec", o.pods[i], os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+string(hc))
		cmd.Stderr = os.Stderr
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
		pods[i] = pod{cmd: cmd, in: in, out: bufio.NewReader(out)}
		if line, err := pods[i].out.ReadString('\n'); err != nil || line != "serving\n" {
			t.Fatalf("check pod on %s: %q, %v", nodeName(i), line, err)
		}
	}
	for _, p := range pods {
		_, _ = io.WriteString(p.in, "go\n")
	}
	res := round.Results[Params, Result]{Reports: map[string]round.Report[Result]{}}
	for i, p := range pods {
		line, err := p.out.ReadString('\n')
		var r Result
		if err != nil || json.Unmarshal([]byte(line), &r) != nil {
			t.Fatalf("check pod on %s: %q, %v", nodeName(i), line, err)
		}
		if r.Detail != "" {
			t.Logf("%s: %s", nodeName(i), r.Detail)
		}
		res.Reports[nodeName(i)] = round.Report[Result]{Node: nodeName(i), Stage: round.Done, Addr: o.podIPs[i], Result: r}
		res.Plans = append(res.Plans, round.Plan[Params]{Node: nodeName(i), Addr: o.podIPs[i], Peers: peers[nodeName(i)]})
	}
	for _, p := range pods {
		_ = p.in.Close() // every pod serves until all have tested it
	}
	s := Aggregate(res)
	for _, p := range s.Pairs {
		t.Logf("%s -> %s: ICMP,TCP,full-size TCP %s, path MTU %d", p.From, p.To, p.Checks(), p.PathMTU)
	}
	t.Logf("DNS failing on %v, Service failing on %v", s.DNSFailing, s.ServiceFailing)
	return s
}

// diagnose runs a baseline round, breaks the overlay with fault, runs a
// round again and diagnoses it against the baseline.
func (o *overlay) diagnose(fault func()) (Summary, Diagnosis) {
	o.serveDNS()
	base := o.round()
	var failing []Pair
	for _, p := range base.Pairs {
		if !p.Passed() {
			failing = append(failing, p)
		}
	}
	if len(failing) > 0 || len(base.DNSFailing) > 0 || len(base.ServiceFailing) > 0 {
		o.t.Fatalf("the baseline fails: %v, DNS %v, Service %v", failing, base.DNSFailing, base.ServiceFailing)
	}
	if fault == nil {
		return base, Diagnose(Input{After: base.Pairs, PodMTU: base.PodMTU, NodeMTU: nodeMTU})
	}
	fault()
	after := o.round()
	d := Diagnose(Input{Baseline: failing, After: after.Pairs, PodMTU: after.PodMTU, NodeMTU: nodeMTU,
		DNSFailing: after.DNSFailing, ServiceFailing: after.ServiceFailing})
	o.t.Logf("diagnosis: %s", d.Message)
	return after, d
}

// nft adds a table with one chain and one rule in namespace ns.
func nft(t *testing.T, ns, family, hook string, rule ...string) {
	t.Helper()
	run := func(args ...string) { sh(t, append([]string{"ip", "netns", "exec", ns, "nft"}, args...)...) }
	run("add", "table", family, "fault")
	run("add", "chain", family, "fault", hook, "{ type filter hook "+hook+" priority 0 ; }")
	run(append([]string{"add", "rule", family, "fault", hook}, rule...)...)
}

func verdicts(d Diagnosis) map[string]Verdict {
	got := map[string]Verdict{}
	for _, pv := range d.Listed {
		got[pv.From+" -> "+pv.To] = pv.Verdict
	}
	return got
}

func allPairs(v Verdict) map[string]Verdict {
	want := map[string]Verdict{}
	for i := range nodeCount {
		for j := range nodeCount {
			if i != j {
				want[nodeName(i)+" -> "+nodeName(j)] = v
			}
		}
	}
	return want
}

func TestPodNetworkPasses(t *testing.T) {
	o := newOverlay(t)
	s, d := o.diagnose(nil)
	t.Logf("diagnosis: %s", d.Message)
	if d.Worse || d.Counts[VerdictPass] != nodeCount*(nodeCount-1) || s.PodMTU != podMTU {
		t.Fatalf("want every pair to pass at MTU %d: %+v, MTU %d", podMTU, d.Counts, s.PodMTU)
	}
	for _, p := range s.Pairs {
		if p.ICMP != Pass {
			t.Errorf("%s -> %s: ICMP %s, want it checked and passing without a capability", p.From, p.To, p.ICMP)
		}
	}
}

func TestTCPDroppedInTheOverlayIsChecksumOffload(t *testing.T) {
	o := newOverlay(t)
	_, d := o.diagnose(func() {
		// What a receiving node does with TCP whose checksum the sender's
		// NIC never filled in: drops it after decapsulation. ICMP passes.
		for _, ns := range o.nodes {
			nft(t, ns, "inet", "forward", "iifname", "vxlan.calico", "meta", "l4proto", "tcp", "drop")
		}
	})
	if got, want := verdicts(d), allPairs(VerdictChecksumOffload); !maps.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	if !strings.Contains(d.Message, "ChecksumOffloadBroken=true") || !strings.Contains(d.Message, "ethtool -K vxlan.calico tx off") {
		t.Errorf("the diagnosis does not name the fix: %s", d.Message)
	}
}

func TestPacketsAbove1400BytesDroppedIsMTU(t *testing.T) {
	o := newOverlay(t)
	_, d := o.diagnose(func() {
		// A link between the nodes that carries 1,400 bytes and drops the
		// rest without a word: a black hole for Path MTU discovery.
		nft(t, o.bridgeNS(), "bridge", "forward", "ip", "length", "> 1400", "drop")
	})
	if got, want := verdicts(d), allPairs(VerdictMTU); !maps.Equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	for _, m := range []string{"Pods use MTU 1450", "node interface MTU is 1500", "largest pod packet that passes is 1350 bytes", "path carries 1400"} {
		if !strings.Contains(d.Message, m) {
			t.Errorf("the diagnosis lacks %q: %s", m, d.Message)
		}
	}
}

func TestUDP4789DroppedBetweenTwoNodesNamesThatPair(t *testing.T) {
	o := newOverlay(t)
	_, d := o.diagnose(func() {
		a, c := o.under[0].String(), o.under[2].String()
		nft(t, o.bridgeNS(), "bridge", "forward", "ip", "saddr", "{ "+a+", "+c+" }", "ip", "daddr", "{ "+a+", "+c+" }", "udp", "dport", "4789", "drop")
	})
	want := map[string]Verdict{"node-1 -> node-3": VerdictVXLANPath, "node-3 -> node-1": VerdictVXLANPath}
	if got := verdicts(d); !maps.Equal(got, want) {
		t.Fatalf("verdicts %v, want exactly %v", got, want)
	}
	if !strings.Contains(d.Message, "on 2 pairs: node-1 -> node-3, node-3 -> node-1. UDP 4789") {
		t.Errorf("the diagnosis does not name exactly the pair: %s", d.Message)
	}
}

// The canary's round (round.PairAround) around node-1, the one node on the
// new calico-node, finds a VXLAN path that fails only between it and an old
// node: each canary node tests the old nodes and they test it back.
func TestCanaryRoundFindsAVXLANPathBlockedBetweenANewNodeAndAnOldOne(t *testing.T) {
	o := newOverlay(t)
	o.serveDNS()
	for _, p := range o.round().Pairs {
		if !p.Passed() {
			t.Fatalf("the baseline fails: %s -> %s", p.From, p.To)
		}
	}
	newNode, oldNode := o.under[0].String(), o.under[1].String()
	nft(t, o.bridgeNS(), "bridge", "forward", "ip", "saddr", "{ "+newNode+", "+oldNode+" }", "ip", "daddr", "{ "+newNode+", "+oldNode+" }",
		"udp", "dport", "4789", "drop")
	after := o.roundOf(round.PairAround(o.members(), []string{nodeName(0)}, "canary"))
	tested := map[string]bool{}
	for _, p := range after.Pairs {
		tested[p.From+" -> "+p.To] = true
	}
	wantTested := map[string]bool{"node-1 -> node-2": true, "node-2 -> node-1": true, "node-1 -> node-3": true, "node-3 -> node-1": true}
	if !maps.Equal(tested, wantTested) {
		t.Fatalf("tested %v, want the canary node's pairs both ways, %v", tested, wantTested)
	}
	d := Diagnose(Input{After: after.Pairs, PodMTU: after.PodMTU, NodeMTU: nodeMTU, DNSFailing: after.DNSFailing, ServiceFailing: after.ServiceFailing})
	want := map[string]Verdict{"node-1 -> node-2": VerdictVXLANPath, "node-2 -> node-1": VerdictVXLANPath}
	if got := verdicts(d); !d.Worse || !maps.Equal(got, want) {
		t.Fatalf("worse %v, verdicts %v, want exactly %v", d.Worse, got, want)
	}
}
