package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

// RerunPreflightAnnotation asks for a new preflight: any new value does.
const RerunPreflightAnnotation = "winready.io/rerun-preflight"

// DefaultProbeTimeout matches the CRD default of spec.preflight.probeTimeout.
const DefaultProbeTimeout = 30 * time.Second

// probeNetwork runs the UDP 4789 probe round and reports whether it passed.
// A round is run for each spec generation and rerun request; while it runs
// the reports wake the reconciler. A failed round stalls the migration and is
// tried again after the preflight retry interval.
func (p *pass) probeNetwork(ctx context.Context) (bool, ctrl.Result, error) {
	prev := p.before.Status.Preflight
	var st *v1alpha1.ProbeStatus
	if prev != nil && prev.Probe != nil {
		st = prev.Probe.DeepCopy()
	}
	if p.wr.Spec.Preflight.SkipNetworkProbe {
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
	token := round.TokenOf(p.wr.Annotations[RerunPreflightAnnotation])
	fresh := st != nil && !st.Skipped && st.Generation == p.wr.Generation &&
		round.StageOf(&st.RoundState) != round.NotStarted && round.TokenOfState(&st.RoundState) == token
	if fresh && st.CompletedAt != nil && failed(st) && now.Sub(st.CompletedAt.Time) >= p.r.preflightRetry() {
		fresh = false
	}
	if !fresh {
		result, err := p.startProbe(ctx, now, token)
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

func failed(st *v1alpha1.ProbeStatus) bool { return st.FailingPairs > 0 || st.MissingReports > 0 }

func (p *pass) probeTimeout() time.Duration {
	if t := p.wr.Spec.Preflight.ProbeTimeout; t != nil {
		return t.Duration
	}
	return DefaultProbeTimeout
}

// probeRound is the round engine for the probe, and the spec of round id:
// the agents probe for spec.preflight.probeTimeout.
func (p *pass) probeRound(id round.ID, token round.Token) (*probe.Engine, round.Spec[probe.Params]) {
	var extra []netip.Addr
	for _, e := range p.wr.Spec.Preflight.ExtraTargets {
		if a, err := netip.ParseAddr(string(e)); err == nil {
			extra = append(extra, a)
		}
	}
	return &probe.Engine{Kind: probe.RoundKind, Client: p.r.Client, Reader: p.r.APIReader, Namespace: p.r.ProbeNamespace, Image: p.r.ProbeImage},
		round.Spec[probe.Params]{ID: id, Token: token, Timeout: round.TimeoutFor(p.probeTimeout()), Owner: round.Owner(p.wr),
			Params: func(context.Context) (probe.Params, error) { return probe.Params{Extra: extra}, nil }}
}

// maxProbeStartAttempts bounds the tries to start a round (each after the
// capped backoff) before a person is asked: a policy engine refusing
// hostNetwork pods, a quota or a missing image does not go away by itself.
const maxProbeStartAttempts = 5

// startProbe starts a new round on every Linux node.
func (p *pass) startProbe(ctx context.Context, now time.Time, token round.Token) (ctrl.Result, error) {
	st := &v1alpha1.ProbeStatus{Generation: p.wr.Generation}
	e, spec := p.probeRound(round.NewID(p.wr.Generation, now), token)
	if err := e.Start(ctx, now, spec, &st.RoundState); err != nil {
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
	p.wr.Status.Preflight.Probe = st
	p.event(corev1.EventTypeNormal, "NetworkProbeStarted", "Preflight", "probing UDP 4789 between %d Linux nodes (round %s)", st.Nodes, st.Round)
	p.progress(conditions.ReasonProgressing, fmt.Sprintf("preflight: probing UDP 4789 between %d Linux nodes", st.Nodes))
	return ctrl.Result{RequeueAfter: spec.Timeout}, nil
}

// stopProbe removes the agents, the plans and the reports of a round that
// is still running, when the spec no longer wants it.
func (p *pass) stopProbe(ctx context.Context) error {
	prev := p.before.Status.Preflight
	if prev == nil || prev.Probe == nil || prev.Probe.Skipped {
		return nil
	}
	e, _ := p.probeRound(round.ID(prev.Probe.Round), "")
	if stopped, err := e.Stop(ctx, &prev.Probe.RoundState); err != nil || !stopped {
		return err
	}
	if pf := p.wr.Status.Preflight; pf != nil {
		pf.Probe = nil
	}
	p.event(corev1.EventTypeNormal, "NetworkProbeStopped", "Preflight", "stopped the UDP 4789 probe round %s as the spec asks", prev.Probe.Round)
	return nil
}

// stopRounds stops the rounds under way, the probe's and the pod network
// check's, when the spec wants none (paused, a dry run, a rollback).
func (p *pass) stopRounds(ctx context.Context) error {
	return errors.Join(p.stopProbe(ctx), p.stopPodCheck(ctx))
}

// collectProbe waits for the reports of a round and judges them once every
// node has reported or the round's time is up.
func (p *pass) collectProbe(ctx context.Context, st *v1alpha1.ProbeStatus, now time.Time) (bool, ctrl.Result, error) {
	e, spec := p.probeRound(round.ID(st.Round), round.TokenOfState(&st.RoundState))
	progress, err := e.Advance(ctx, now, spec, &st.RoundState)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if progress.Stage != round.Complete {
		p.progress(conditions.ReasonProgressing, fmt.Sprintf("preflight: probing UDP 4789, %d of %d nodes reported", progress.Reported, progress.Expected))
		return false, ctrl.Result{RequeueAfter: progress.Wait}, nil
	}
	res, ok, err := e.Results(ctx, &st.RoundState)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if !ok {
		// The plans are gone (removed by hand, or a round replaced them):
		// probe again.
		result, err := p.startProbe(ctx, now, round.TokenOf(p.wr.Annotations[RerunPreflightAnnotation]))
		return false, result, err
	}
	result := probe.Judge(res)
	result.RoundState, result.Generation = st.RoundState, st.Generation
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
	if err := e.Cleanup(ctx); err != nil {
		return false, ctrl.Result{}, err
	}
	if failed(&result) {
		p.event(corev1.EventTypeWarning, "NetworkProbeFailed", "Preflight", "%s", probeMessage(&result, res.Failed))
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
