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
		if err := p.stopProbe(ctx); err != nil {
			return false, ctrl.Result{}, err
		}
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
		result, err := p.startProbe(ctx, now, trigger)
		return false, result, err
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
	return preflight.RoundConfig{Namespace: p.r.ProbeNamespace, Image: p.r.ProbeImage, Duration: p.probeTimeout(), Extra: p.extraTargets()}
}

// maxProbeStartAttempts bounds the tries to start a round (each after the
// capped backoff) before a person is asked: a policy engine refusing
// hostNetwork pods, a quota or a missing image does not go away by itself.
const maxProbeStartAttempts = 5

// startProbe starts a new round on every Linux node.
func (p *pass) startProbe(ctx context.Context, now time.Time, trigger string) (ctrl.Result, error) {
	nodes, err := preflight.ListLinuxNodes(ctx, p.r.APIReader)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("preflight: listing nodes: %w", err)
	}
	round := preflight.RoundID(p.wr.Generation, now) + roundSuffix(trigger)
	owner := []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WindowsReadiness", Name: p.wr.Name, UID: p.wr.UID}}
	if err := preflight.StartRound(ctx, p.r.Client, p.roundConfig(), round, nodes, owner); err != nil {
		if attempts := p.r.retries.attempts() + 1; attempts >= maxProbeStartAttempts {
			msg := fmt.Sprintf("preflight failed, nothing was changed: the UDP 4789 probe could not be started in %d attempts: %v. "+
				"Fix what the API server says (an admission policy refusing hostNetwork pods, a quota, the probe image), then "+
				"annotate %s, or set spec.preflight.skipNetworkProbe if the path was verified another way", attempts, err, RerunPreflightAnnotation)
			p.set(conditions.PreflightPassed, metav1.ConditionFalse, conditions.ReasonNetworkProbeFailed, msg)
			if !p.alreadyStalled(conditions.ReasonNetworkProbeFailed) {
				p.event(corev1.EventTypeWarning, conditions.ReasonNetworkProbeFailed, "Preflight", "%s", msg)
			}
			p.stall(conditions.ReasonNetworkProbeFailed, msg)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("preflight: starting the UDP 4789 probe: %w", err)
	}
	started := metav1.NewTime(now)
	p.wr.Status.Preflight.Probe = &v1alpha1.ProbeStatus{Round: round, Generation: p.wr.Generation, StartedAt: &started, Nodes: int32(len(nodes))}
	p.event(corev1.EventTypeNormal, "NetworkProbeStarted", "Preflight", "probing UDP 4789 between %d Linux nodes (round %s)", len(nodes), round)
	p.progress(conditions.ReasonProgressing, fmt.Sprintf("preflight: probing UDP 4789 between %d Linux nodes", len(nodes)))
	return ctrl.Result{RequeueAfter: p.probeTimeout() + probeStartGrace}, nil
}

// stopProbe removes the agents, the plan and the reports of a round that is
// still running, when the spec no longer wants it (skipped, paused, rolled
// back).
func (p *pass) stopProbe(ctx context.Context) error {
	prev := p.before.Status.Preflight
	if prev == nil || prev.Probe == nil || prev.Probe.Skipped || prev.Probe.Round == "" || prev.Probe.CompletedAt != nil {
		return nil
	}
	if err := preflight.Cleanup(ctx, p.r.Client, p.r.ProbeNamespace); err != nil {
		return err
	}
	if pf := p.wr.Status.Preflight; pf != nil {
		pf.Probe = nil
	}
	p.event(corev1.EventTypeNormal, "NetworkProbeStopped", "Preflight", "stopped the UDP 4789 probe round %s as the spec asks", prev.Probe.Round)
	return nil
}

// collectProbe waits for the reports of a round and aggregates them once
// every node has reported or the round's time is up.
func (p *pass) collectProbe(ctx context.Context, st *v1alpha1.ProbeStatus, now time.Time) (bool, ctrl.Result, error) {
	reports, failures, err := preflight.ReadReports(ctx, p.r.Client, p.r.ProbeNamespace, st.Round)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	deadline := st.StartedAt.Add(p.probeTimeout() + probeStartGrace)
	if got := len(reports) + len(failures); got < int(st.Nodes) && now.Before(deadline) {
		p.progress(conditions.ReasonProgressing, fmt.Sprintf("preflight: probing UDP 4789, %d of %d nodes reported", got, st.Nodes))
		return false, ctrl.Result{RequeueAfter: deadline.Sub(now)}, nil
	}
	// Count against the plan the agents were given, not the nodes of now.
	nodes, plan, err := preflight.ReadPlan(ctx, p.r.APIReader, p.r.ProbeNamespace, st.Round)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if nodes == nil {
		// The plan is gone (removed by hand, or a round replaced it): probe again.
		result, err := p.startProbe(ctx, now, p.wr.Annotations[RerunPreflightAnnotation])
		return false, result, err
	}
	result := preflight.Aggregate(nodes, plan, p.extraTargets(), reports)
	result.Round, result.Generation, result.StartedAt = st.Round, st.Generation, st.StartedAt
	completed := metav1.NewTime(now)
	result.CompletedAt = &completed
	p.wr.Status.Preflight.Probe = &result
	if failed(&result) {
		p.probeFailed(&result)
	}
	// The reports are deleted only once the status that sums them up is
	// saved: a status write that fails leaves them for the next pass.
	p.wr.Status.Phase = conditions.Phase(p.wr)
	if err := p.persist(ctx); err != nil {
		return false, ctrl.Result{}, err
	}
	if err := preflight.Cleanup(ctx, p.r.Client, p.r.ProbeNamespace); err != nil {
		return false, ctrl.Result{}, err
	}
	if failed(&result) {
		p.event(corev1.EventTypeWarning, "NetworkProbeFailed", "Preflight", "%s", probeMessage(&result, failures))
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
