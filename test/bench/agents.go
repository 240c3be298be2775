package main

import (
	"context"
	"net/http"
	"net/netip"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
)

// The fleet's agents are winready's own: probe.RunRound and
// podcheck.RunRound, as the agents' pods run them, with the node's sockets
// swapped for a simulated network on which every probe and every check
// arrives.

// runProbeAgent is the UDP probe agent of node n.
func runProbeAgent(ctx context.Context, c client.WithWatch, n calicosim.Node, net *network) error {
	a := round.Agent[probe.Params, probe.Result]{Client: c, Kind: probe.RoundKind, Namespace: probeNamespace, Node: n.Name}
	return probe.RunRound(ctx, a, net.prober)
}

// runPodCheckAgent is the pod network check pod of node n.
func runPodCheckAgent(ctx context.Context, c client.WithWatch, ds *appsv1.DaemonSet, n calicosim.Node) error {
	a := round.Agent[podcheck.Params, podcheck.Result]{Client: c, Kind: podcheck.RoundKind, Namespace: probeNamespace, Node: n.Name}
	id := round.ID(ds.Spec.Template.Annotations[round.RoundAnnotation])
	ip := netip.MustParseAddr(n.InternalIP).As4()
	podIP := netip.AddrFrom4([4]byte{10, 244, ip[2], ip[3]})
	return podcheck.RunRound(ctx, a, id, podIP, passingChecks)
}

// network stands for the nodes' network in a probe round: an agent is heard
// by its peers once it probes, as every probe arrives.
type network struct {
	mu sync.Mutex
	up map[netip.Addr]chan struct{}
}

func (n *network) probing(addr netip.Addr) chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.up == nil {
		n.up = map[netip.Addr]chan struct{}{}
	}
	if n.up[addr] == nil {
		n.up[addr] = make(chan struct{})
	}
	return n.up[addr]
}

// prober is a probe.Network: the agent's probes go out on the network.
func (n *network) prober(cfg probe.AgentConfig) (probe.Prober, error) {
	return &simulatedProber{cfg: cfg, net: n}, nil
}

// simulatedProber probes as probe.Agent does, in the round's window, over
// the simulated network: it is heard by every peer once it starts, and
// hears a peer once that peer starts; every extra target echoes.
type simulatedProber struct {
	cfg probe.AgentConfig
	net *network
}

func (p *simulatedProber) Run(ctx context.Context, report func(probe.Result)) probe.Result {
	res := probe.Result{Mode: probe.ModeCapture, EchoedBy: p.cfg.Extra}
	if !wait(ctx, p.cfg.Start) {
		return res
	}
	close(p.net.probing(p.cfg.NodeIP))
	for _, from := range p.cfg.Expect {
		select {
		case <-ctx.Done():
			return res
		case <-time.After(time.Until(p.cfg.End)):
		case <-p.net.probing(from):
			res.ReceivedFrom = append(res.ReceivedFrom, from)
		}
	}
	report(res)
	return res
}

// passingChecks is a podcheck.Checks on which every check passes.
func passingChecks(_ context.Context, cfg podcheck.Config) podcheck.Result {
	res := podcheck.Result{MTU: 1450, DNS: podcheck.Pass, Service: podcheck.Pass}
	for _, p := range cfg.Peers {
		res.Peers = append(res.Peers, podcheck.PeerResult{Peer: p, ICMP: podcheck.Pass, TCPSmall: podcheck.Pass, TCPFull: podcheck.Pass})
	}
	return res
}

// wait waits until t, as an agent waits for its round's start; false when
// stopped first.
func wait(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

// burst lets at most n of the agents' requests other than watches run at
// once, as agents' pods come up over a while rather than all at once. A
// watch (an agent waiting for its plan) holds no place.
func burst(n int, rt http.RoundTripper) http.RoundTripper {
	places := make(chan struct{}, n)
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") == "true" {
			return rt.RoundTrip(req)
		}
		places <- struct{}{}
		defer func() { <-places }()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
