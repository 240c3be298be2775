package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/test/calicosim"
)

// runProbeAgent is the UDP probe agent of node as probe_cmd.go runs it,
// every probe arriving: it reads the plan, probes for the round's duration
// from its own start, and writes its report.
func runProbeAgent(ctx context.Context, c client.Client, _ *appsv1.DaemonSet, n calicosim.Node, starting chan struct{}) error {
	starting <- struct{}{}
	plan := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: probeNamespace, Name: preflight.ProbeName}, plan)
	<-starting
	if err != nil {
		return fmt.Errorf("reading the probe plan: %w", err)
	}
	np, err := preflight.DecodePlan(plan.Data, n.Name)
	if err != nil {
		return err
	}
	// Every agent that probes this node is heard.
	var from []netip.Addr
	for key := range plan.Data {
		if key == n.Name || key == preflight.PlanRound || key == preflight.PlanDuration || key == preflight.PlanExtra ||
			strings.HasPrefix(key, preflight.PlanMetaPrefix) {
			continue
		}
		peer, err := preflight.DecodePlan(plan.Data, key)
		if err == nil && slices.Contains(peer.Peers, np.IP) {
			from = append(from, peer.IP)
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(np.Duration): // the agent's probing, which has a real duration
	}
	report := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: preflight.ReportName(n.Name),
			Labels: preflight.ReportLabels(np.Round)},
		Data: preflight.EncodeReport(np.Round, n.Name, probe.ModeCapture, from, np.Extra, ""),
	}
	if err := c.Create(ctx, report); apierrors.IsAlreadyExists(err) {
		err = c.Update(ctx, report)
	} else if err != nil {
		return fmt.Errorf("writing the probe report: %w", err)
	}
	return nil
}

// runPodCheckAgent is the pod network check pod of node as podcheck_cmd.go
// runs it, every check passing: it reports that it serves, waits for the
// plan, and reports its checks.
func runPodCheckAgent(ctx context.Context, c client.WithWatch, ds *appsv1.DaemonSet, n calicosim.Node, starting chan struct{}) error {
	round := ds.Spec.Template.Annotations[preflight.ReportLabel]
	ip := netip.MustParseAddr(n.InternalIP).As4()
	podIP := netip.AddrFrom4([4]byte{10, 244, ip[2], ip[3]})
	starting <- struct{}{}
	err := writeCheckReport(ctx, c, podcheck.Report(probeNamespace, round, n.Name, podcheck.EncodeServing(round, n.Name, podIP, 1450)), false)
	<-starting
	if err != nil {
		return err
	}
	plan, err := waitForPlan(ctx, c, round)
	if err != nil {
		return err
	}
	np, err := preflight.DecodePlan(plan, n.Name)
	if err != nil {
		return writeCheckReport(ctx, c, podcheck.Report(probeNamespace, round, n.Name,
			podcheck.EncodeDone(round, n.Name, podIP, podcheck.Result{}, err.Error())), true)
	}
	res := podcheck.Result{MTU: 1450, DNS: podcheck.Pass, Service: podcheck.Pass}
	for _, p := range np.Peers {
		res.Peers = append(res.Peers, podcheck.PeerResult{Peer: p, ICMP: podcheck.Pass, TCPSmall: podcheck.Pass, TCPFull: podcheck.Pass})
	}
	return writeCheckReport(ctx, c, podcheck.Report(probeNamespace, round, n.Name, podcheck.EncodeDone(round, n.Name, podIP, res, "")), true)
}

func writeCheckReport(ctx context.Context, c client.Client, cm *corev1.ConfigMap, replace bool) error {
	var err error
	if replace {
		if err = c.Update(ctx, cm); apierrors.IsNotFound(err) {
			err = c.Create(ctx, cm)
		}
	} else if err = c.Create(ctx, cm); apierrors.IsAlreadyExists(err) {
		err = c.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("writing the pod network check report: %w", err)
	}
	return nil
}

func waitForPlan(ctx context.Context, c client.WithWatch, round string) (map[string]string, error) {
	for {
		w, err := c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(probeNamespace),
			client.MatchingFields{"metadata.name": podcheck.Name})
		if err != nil {
			return nil, fmt.Errorf("watching the pod network check plan: %w", err)
		}
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted && cm.Data[preflight.PlanRound] == round {
				w.Stop()
				return cm.Data, nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, errors.New("stopped before the plan came")
		}
	}
}
