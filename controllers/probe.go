package controllers

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/preflight"
)

// RerunPreflightAnnotation asks for a new preflight: any new value does.
const RerunPreflightAnnotation = "winready.io/rerun-preflight"

// DefaultProbeTimeout matches the CRD default of spec.preflight.probeTimeout.
const DefaultProbeTimeout = 30 * time.Second

// probeStartGrace is how long agents may take to be scheduled and start,
// on top of the probe timeout, before a node's report counts as missing.
const probeStartGrace = 60 * time.Second

// probeNetwork runs the UDP 4789 probe round and reports whether it passed.
// A round is run for each spec generation and rerun request; while it runs
// the reports wake the reconciler. A failed round stalls the migration and is
// tried again after the preflight retry interval.
func (p *pass) probeNetwork(ctx context.Context) (bool, ctrl.Result, error) {
	spec := p.wr.Spec.Preflight
	prev := p.before.Status.Preflight
	var st *v1alpha1.ProbeStatus
	if prev != nil && prev.Probe != nil {
		st = prev.Probe.DeepCopy()
	}
	trigger := p.wr.Annotations[RerunPreflightAnnotation]

	if spec.SkipNetworkProbe {
		if st == nil || !st.Skipped {
			p.event(corev1.EventTypeWarning, "NetworkProbeSkipped", "Preflight",
				"the UDP 4789 probe is skipped as spec.preflight.skipNetworkProbe asks: VXLAN between nodes is not verified")
		}
		p.wr.Status.Preflight.Probe = &v1alpha1.ProbeStatus{Skipped: true, Generation: p.wr.Generation}
		return true, ctrl.Result{}, nil
	}

	now := p.r.Clock.Now()
	fresh := st != nil && !st.Skipped && st.Generation == p.wr.Generation && st.Round != "" &&
		strings.HasSuffix(st.Round, roundSuffix(trigger))
	if fresh && st.CompletedAt != nil && failed(st) && now.Sub(st.CompletedAt.Time) >= p.r.preflightRetry() {
		fresh = false
	}
	if !fresh {
		return false, p.startProbe(ctx, now, trigger), nil
	}
	p.wr.Status.Preflight.Probe = st
	if st.CompletedAt == nil {
		return p.collectProbe(ctx, st, now)
	}
	if failed(st) {
		p.probeFailed(st)
		return false, ctrl.Result{RequeueAfter: p.r.preflightRetry() - now.Sub(st.CompletedAt.Time)}, nil
	}
	return true, ctrl.Result{}, nil
}

func roundSuffix(trigger string) string {
	if trigger == "" {
		return ""
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(trigger))
	return fmt.Sprintf("-r%x", h.Sum32())
}

func failed(st *v1alpha1.ProbeStatus) bool { return st.FailingPairs > 0 || st.MissingReports > 0 }

func (p *pass) probeTimeout() time.Duration {
	if t := p.wr.Spec.Preflight.ProbeTimeout; t != nil {
		return t.Duration
	}
	return DefaultProbeTimeout
}

func (p *pass) extraTargets() []netip.Addr {
	var extra []netip.Addr
	for _, e := range p.wr.Spec.Preflight.ExtraTargets {
		if a, err := netip.ParseAddr(string(e)); err == nil {
			extra = append(extra, a)
		}
	}
	return extra
}

func (p *pass) roundConfig() preflight.RoundConfig {
	return preflight.RoundConfig{Namespace: p.r.Namespace, Image: p.r.ProbeImage, Duration: p.probeTimeout(), Extra: p.extraTargets()}
}

// startProbe starts a new round on every Linux node.
func (p *pass) startProbe(ctx context.Context, now time.Time, trigger string) ctrl.Result {
	nodes, err := preflight.ListLinuxNodes(ctx, p.r.APIReader)
	if err != nil {
		p.progress(conditions.ReasonProgressing, "preflight: cannot list nodes: "+err.Error())
		return ctrl.Result{RequeueAfter: p.r.guardRetry()}
	}
	round := preflight.RoundID(p.wr.Generation, now) + roundSuffix(trigger)
	owner := []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WindowsReadiness", Name: p.wr.Name, UID: p.wr.UID}}
	if err := preflight.StartRound(ctx, p.r.Client, p.roundConfig(), round, nodes, owner); err != nil {
		p.progress(conditions.ReasonProgressing, "preflight: cannot start the UDP 4789 probe: "+err.Error())
		return ctrl.Result{RequeueAfter: p.r.guardRetry()}
	}
	started := metav1.NewTime(now)
	p.wr.Status.Preflight.Probe = &v1alpha1.ProbeStatus{Round: round, Generation: p.wr.Generation, StartedAt: &started, Nodes: int32(len(nodes))}
	p.event(corev1.EventTypeNormal, "NetworkProbeStarted", "Preflight", "probing UDP 4789 between %d Linux nodes (round %s)", len(nodes), round)
	p.progress(conditions.ReasonProgressing, fmt.Sprintf("preflight: probing UDP 4789 between %d Linux nodes", len(nodes)))
	return ctrl.Result{RequeueAfter: p.probeTimeout() + probeStartGrace}
}

// collectProbe waits for the reports of a round and aggregates them once
// every node has reported or the round's time is up.
func (p *pass) collectProbe(ctx context.Context, st *v1alpha1.ProbeStatus, now time.Time) (bool, ctrl.Result, error) {
	reports, failures, err := preflight.ReadReports(ctx, p.r.Client, p.r.Namespace, st.Round)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	deadline := st.StartedAt.Add(p.probeTimeout() + probeStartGrace)
	if got := len(reports) + len(failures); got < int(st.Nodes) && now.Before(deadline) {
		p.progress(conditions.ReasonProgressing, fmt.Sprintf("preflight: probing UDP 4789, %d of %d nodes reported", got, st.Nodes))
		return false, ctrl.Result{RequeueAfter: deadline.Sub(now)}, nil
	}
	nodes, err := preflight.ListLinuxNodes(ctx, p.r.APIReader)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	plan := preflight.Plan(nodes, st.Round)
	result := preflight.Aggregate(nodes, plan, p.extraTargets(), reports)
	result.Round, result.Generation, result.StartedAt = st.Round, st.Generation, st.StartedAt
	completed := metav1.NewTime(now)
	result.CompletedAt = &completed
	p.wr.Status.Preflight.Probe = &result
	if err := preflight.Cleanup(ctx, p.r.Client, p.r.Namespace); err != nil {
		return false, ctrl.Result{}, err
	}
	if failed(&result) {
		p.event(corev1.EventTypeWarning, "NetworkProbeFailed", "Preflight", "%s", probeMessage(&result, failures))
		p.probeFailed(&result)
		return false, ctrl.Result{RequeueAfter: p.r.preflightRetry()}, nil
	}
	p.event(corev1.EventTypeNormal, "NetworkProbePassed", "Preflight", "UDP 4789 passed on all %d probed pairs", result.PassedPairs)
	return true, ctrl.Result{}, nil
}

func (p *pass) probeFailed(st *v1alpha1.ProbeStatus) {
	msg := "preflight failed, nothing was changed: " + probeMessage(st, nil)
	p.set(conditions.PreflightPassed, metav1.ConditionFalse, conditions.ReasonNetworkProbeFailed, msg)
	p.stall(conditions.ReasonNetworkProbeFailed, msg)
}

// probeMessage names the failing pairs and the silent nodes, and the fix.
func probeMessage(st *v1alpha1.ProbeStatus, failures map[string]string) string {
	var parts []string
	if st.FailingPairs > 0 {
		pairs := make([]string, 0, len(st.FirstFailing))
		for _, pair := range st.FirstFailing {
			pairs = append(pairs, pair.From+" -> "+pair.To)
		}
		more := ""
		if int(st.FailingPairs) > len(pairs) {
			more = fmt.Sprintf(" and %d more", int(st.FailingPairs)-len(pairs))
		}
		parts = append(parts, fmt.Sprintf("UDP 4789 did not pass %d of %d probed pairs: %s%s; open UDP 4789 between these nodes (security groups, host firewalls)",
			st.FailingPairs, st.PlannedPairs, strings.Join(pairs, ", "), more))
	}
	if st.MissingReports > 0 {
		detail := make([]string, 0, len(st.FirstMissing))
		for _, n := range st.FirstMissing {
			if why := failures[n]; why != "" {
				n += " (" + why + ")"
			}
			detail = append(detail, n)
		}
		sort.Strings(detail)
		parts = append(parts, fmt.Sprintf("%d nodes did not report (%s): check the winready-probe pods, or set spec.preflight.skipNetworkProbe if hostNetwork pods are not allowed",
			st.MissingReports, strings.Join(detail, ", ")))
	}
	return strings.Join(parts, "; ")
}
