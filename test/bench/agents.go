package main

import (
	"context"
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

// runProbeAgent is the UDP probe agent of node as probe.RunRound runs it,
// every probe arriving: it reads its plan and the round's key, waits for
// the round's start, probes until it has heard every node it expects (or
// the window ends) and writes its report.
func runProbeAgent(ctx context.Context, c client.WithWatch, _ *appsv1.DaemonSet, n calicosim.Node, starting chan struct{}, net *network) error {
	a := round.Agent[probe.Params, probe.Result]{Client: c, Kind: probe.RoundKind, Namespace: probeNamespace, Node: n.Name}
	starting <- struct{}{}
	plan, err := a.Plan(ctx, "")
	var secret []byte
	if err == nil {
		secret, err = a.Secret(ctx, plan.Round)
	}
	<-starting
	if err != nil || len(secret) == 0 {
		return err
	}
	report := round.Report[probe.Result]{Round: plan.Round, Stage: round.Done, Addr: plan.Addr}
	if _, _, err := plan.Window(time.Now(), probe.LeastWindow); err != nil {
		report.Error = err.Error()
		return a.Report(ctx, report)
	}
	if !wait(ctx, plan.Start) {
		return nil
	}
	close(net.probing(plan.Addr))
	res := probe.Result{Mode: probe.ModeCapture, EchoedBy: plan.Params.Extra}
	for _, from := range plan.Expect {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(plan.End)):
		case <-net.probing(from):
			res.ReceivedFrom = append(res.ReceivedFrom, from)
		}
	}
	report.Result = res
	return a.Report(ctx, report)
}

// runPodCheckAgent is the pod network check pod of node as
// podcheck.RunRound runs it, every check passing: it reports that it
// serves, waits for its plan and the round's start, and reports its checks.
func runPodCheckAgent(ctx context.Context, c client.WithWatch, ds *appsv1.DaemonSet, n calicosim.Node, starting chan struct{}, _ *network) error {
	a := round.Agent[podcheck.Params, podcheck.Result]{Client: c, Kind: podcheck.RoundKind, Namespace: probeNamespace, Node: n.Name}
	id := round.ID(ds.Spec.Template.Annotations[round.RoundAnnotation])
	ip := netip.MustParseAddr(n.InternalIP).As4()
	podIP := netip.AddrFrom4([4]byte{10, 244, ip[2], ip[3]})
	starting <- struct{}{}
	err := a.Report(ctx, round.Report[podcheck.Result]{Round: id, Stage: round.Serving, Addr: podIP})
	<-starting
	if err != nil {
		return err
	}
	plan, err := a.Plan(ctx, id)
	if err != nil || !wait(ctx, plan.Start) {
		return err
	}
	res := podcheck.Result{MTU: 1450, DNS: podcheck.Pass, Service: podcheck.Pass}
	for _, p := range plan.Peers {
		res.Peers = append(res.Peers, podcheck.PeerResult{Peer: p, ICMP: podcheck.Pass, TCPSmall: podcheck.Pass, TCPFull: podcheck.Pass})
	}
	return a.Report(ctx, round.Report[podcheck.Result]{Round: id, Stage: round.Done, Addr: podIP, Result: res})
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
