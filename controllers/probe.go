package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

// DefaultProbeTimeout matches the CRD default of spec.preflight.probeTimeout.
const DefaultProbeTimeout = 30 * time.Second

// probeRound runs the UDP 4789 probe round on the round engine and is done
// once it passed. A round is run again for new values of the spec fields it
// runs with (probeDigest), for each rerun request, and, once it is over,
// when a Linux node joined since it began; a spec edit of anything else
// (paused, approvedSteps, acknowledge) keeps it. While it runs the reports
// wake the reconciler. Only a round this manager started and judged counts
// (seen.probeRan): the status shows the verdict but does not prove it. A
// failed round stops the migration and is tried again after the preflight
// retry interval.
type probeRound struct{ *Reconciler }

func (r probeRound) reconcile(ctx context.Context, s *scope) Outcome {
	prev := s.before.Status.Preflight
	var st *v1alpha1.ProbeStatus
	if prev != nil && prev.Probe != nil {
		st = prev.Probe.DeepCopy()
	}
	if s.wr.Spec.Preflight.SkipNetworkProbe {
		if err := r.cancel(ctx, s); err != nil {
			return failed(err)
		}
		if st == nil || !st.Skipped {
			s.note(corev1.EventTypeWarning, conditions.ReasonNetworkProbeSkipped, "Preflight",
				"the UDP 4789 probe is skipped as spec.preflight.skipNetworkProbe asks: VXLAN between nodes is not verified")
		}
		s.wr.Status.Preflight.Probe = &v1alpha1.ProbeStatus{Skipped: true, Generation: s.wr.Generation}
		return done()
	}

	token := round.TokenOf(s.wr.Annotations[RerunPreflightAnnotation])
	inputs, err := probeDigest(s)
	if err != nil {
		return failed(err)
	}
	fresh, err := r.fresh(ctx, s, st, inputs, token)
	if err != nil {
		return failed(err)
	}
	var rs *v1alpha1.RoundState
	if fresh {
		s.wr.Status.Preflight.Probe = st
		rs = &st.RoundState
	}
	if o, over := r.step(s, token, inputs).run(ctx, s, rs); !over {
		return o
	}
	if probeFailing(st) {
		return r.failedRound(s, st).lookAgain(r.opts.PreflightRetry - s.now.Sub(st.CompletedAt.Time))
	}
	return done()
}

// fresh says whether st is a round this manager ran for inputs and token
// that still stands: one under way, or one over whose nodes are all the
// Linux nodes there are now and which, if it failed, failed less than the
// preflight retry interval ago.
func (r probeRound) fresh(ctx context.Context, s *scope, st *v1alpha1.ProbeStatus, inputs string, token round.Token) (bool, error) {
	if st == nil || st.Skipped || st.InputDigest != inputs || round.StageOf(&st.RoundState) == round.NotStarted ||
		round.TokenOfState(&st.RoundState) != token || !r.seen.probeRan(st) {
		return false, nil
	}
	if st.CompletedAt == nil {
		// A node that joins while the round runs is seen once it is over.
		return true, nil
	}
	if probeFailing(st) && s.now.Sub(st.CompletedAt.Time) >= r.opts.PreflightRetry {
		return false, nil
	}
	nodes, err := linuxNodeNames(ctx, r.Client)
	if err != nil {
		return false, err
	}
	return r.seen.probeCovers(nodes), nil
}

func probeFailing(st *v1alpha1.ProbeStatus) bool { return st.FailingPairs > 0 || st.MissingReports > 0 }

func probeTimeout(s *scope) time.Duration {
	if t := s.wr.Spec.Preflight.ProbeTimeout; t != nil {
		return t.Duration
	}
	return DefaultProbeTimeout
}

// engine is the round engine for the probe, and the spec of round id: the
// agents probe for spec.preflight.probeTimeout.
func (r probeRound) engine(s *scope, id round.ID, token round.Token) (*probe.Engine, round.Spec[probe.Params]) {
	var extra []netip.Addr
	for _, e := range s.wr.Spec.Preflight.ExtraTargets {
		if a, err := netip.ParseAddr(string(e)); err == nil {
			extra = append(extra, a)
		}
	}
	return &probe.Engine{Kind: probe.RoundKind, Client: r.Client, Reader: r.APIReader, Namespace: r.opts.ProbeNamespace, Image: r.opts.ProbeImage,
			Removed: &r.removed},
		round.Spec[probe.Params]{ID: id, Token: token, Timeout: round.TimeoutFor(probeTimeout(s)), Owner: round.Owner(s.wr),
			Params: func(context.Context) (probe.Params, error) { return probe.Params{Extra: extra}, nil }}
}

// step is the probe's round step: a new round runs on every Linux node
// for token and inputs. A start the API server refuses (a policy engine
// refusing hostNetwork pods, a quota) is tried a bounded number of times
// (each after the workqueue's backoff) before a person is asked, as it does
// not go away by itself. A failed round stops the migration and is tried
// again after the preflight retry interval.
func (r probeRound) step(s *scope, token round.Token, inputs string) roundStep[probe.Params, probe.Result] {
	var nodes []string
	return roundStep[probe.Params, probe.Result]{r: r.Reconciler, token: token,
		what: "the UDP 4789 probe", starting: "preflight: starting the UDP 4789 probe",
		fix: "an admission policy refusing hostNetwork pods, a quota, the probe image",
		rerun: fmt.Sprintf("kubectl winready rerun preflight (or kubectl annotate wr default %s=$(date +%%s) --overwrite), "+
			"or set spec.preflight.skipNetworkProbe if the path was verified another way", RerunPreflightAnnotation),
		reports: "the probe reports are deleted",
		engine: func(id round.ID, token round.Token) (*probe.Engine, round.Spec[probe.Params]) {
			return r.engine(s, id, token)
		},
		prepare: func(ctx context.Context, _ *round.Spec[probe.Params]) (err error) {
			// The nodes as the round begins, read before it lists them past
			// the cache: a node the cache shows late is probed again once
			// the round is over, never left out.
			nodes, err = linuxNodeNames(ctx, r.Client)
			return err
		},
		started: func(rs v1alpha1.RoundState, spec round.Spec[probe.Params]) Outcome {
			st := &v1alpha1.ProbeStatus{RoundState: rs, Generation: s.wr.Generation, InputDigest: inputs}
			s.wr.Status.Preflight.Probe = st
			r.seen.startedProbe(st.Round, nodes)
			s.note(corev1.EventTypeNormal, conditions.ReasonNetworkProbeStarted, "Preflight", "probing UDP 4789 between %d Linux nodes (round %s)", st.Nodes, st.Round)
			return progressing(spec.Timeout, "preflight: probing UDP 4789 between %d Linux nodes", st.Nodes)
		},
		waiting: func(p round.Progress) Outcome {
			return progressing(p.Wait, "preflight: probing UDP 4789, %d of %d nodes reported", p.Reported, p.Expected)
		},
		judge: func(_ context.Context, res round.Results[probe.Params, probe.Result]) func() Outcome {
			return r.judge(s, res)
		},
		refused: func(msg string) Outcome {
			return probeFailed(s, "preflight failed, nothing was changed: "+msg)
		},
	}
}

// judge sums a complete round up in the status; a failed one stops the
// migration (PreflightPassed is saved with the status) and is looked at
// again after the preflight retry interval.
func (r probeRound) judge(s *scope, res round.Results[probe.Params, probe.Result]) func() Outcome {
	st := s.wr.Status.Preflight.Probe
	result := probe.Judge(res)
	result.RoundState, result.Generation, result.InputDigest = st.RoundState, st.Generation, st.InputDigest
	s.wr.Status.Preflight.Probe = &result
	r.seen.judgedProbe(&result)
	if probeFailing(&result) {
		o := r.failedRound(s, &result)
		return func() Outcome { return o.lookAgain(r.opts.PreflightRetry) }
	}
	return func() Outcome {
		s.note(corev1.EventTypeNormal, conditions.ReasonNetworkProbePassed, "Preflight", "UDP 4789 passed on all %d probed pairs", result.PassedPairs)
		return done()
	}
}

// cancel removes the agents, the plans and the reports of a round that is
// still running, when the spec no longer wants it.
func (r probeRound) cancel(ctx context.Context, s *scope) error {
	prev := s.before.Status.Preflight
	if prev == nil || prev.Probe == nil || prev.Probe.Skipped {
		return nil
	}
	if stopped, err := r.step(s, "", "").cancel(ctx, &prev.Probe.RoundState); err != nil || !stopped {
		return err
	}
	if pf := s.wr.Status.Preflight; pf != nil {
		pf.Probe = nil
	}
	s.note(corev1.EventTypeNormal, conditions.ReasonNetworkProbeStopped, "Preflight", "stopped the UDP 4789 probe round %s as the spec asks", prev.Probe.Round)
	return nil
}

// cancelRounds stops the rounds under way, the probe's and the pod network
// check's, when the spec wants none (paused, a dry run, a rollback).
func (r *Reconciler) cancelRounds(ctx context.Context, s *scope) error {
	return errors.Join(probeRound{r}.cancel(ctx, s), podCheck{r, BaselineCheck}.cancel(ctx, s))
}

// failedRound stops the migration on a round that did not pass.
func (r probeRound) failedRound(s *scope, st *v1alpha1.ProbeStatus) Outcome {
	return probeFailed(s, "preflight failed, nothing was changed: "+probeMessage(st))
}

// probeMessage names the failing pairs and the silent nodes, and the fix.
func probeMessage(st *v1alpha1.ProbeStatus) string {
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
		why := make(map[string]string, len(st.MissingReasons))
		for _, m := range st.MissingReasons {
			why[m.Node] = m.Reason
		}
		detail := make([]string, 0, len(st.FirstMissing))
		for _, n := range st.FirstMissing {
			if why[n] != "" {
				n += " (" + why[n] + ")"
			}
			detail = append(detail, n)
		}
		sort.Strings(detail)
		parts = append(parts, fmt.Sprintf("%d nodes did not report (%s): check the winready-probe pods, or set spec.preflight.skipNetworkProbe if hostNetwork pods are not allowed",
			st.MissingReports, strings.Join(detail, ", ")))
	}
	return strings.Join(parts, "; ")
}

// probeDigest digests the spec fields a probe round runs with.
func probeDigest(s *scope) (string, error) {
	return digestOf([]any{slices.Sorted(slices.Values(s.wr.Spec.Preflight.ExtraTargets)), probeTimeout(s).String()})
}
