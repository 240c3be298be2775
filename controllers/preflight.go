package controllers

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/round"
)

// preflightChecks runs the compatibility checks and records them; a failed
// check stops the migration before any change. The checks read the cluster
// past the cache (preflight.Gather: about 15 requests, and every Node, pool,
// policy, DaemonSet and IPAM block a page at a time), so a pass runs them
// only when what they read may have changed; other passes before the first
// change (those the probe round and the pod network check wake) take the
// verdict this manager last reached.
type preflightChecks struct{ *Reconciler }

func (r preflightChecks) reconcile(ctx context.Context, s *scope) Outcome {
	existing, err := calico.GetServicesEndpoint(ctx, r.Client)
	if err != nil {
		return failed(err)
	}
	digest, err := r.preflightDigest(ctx, s, existing)
	if err != nil {
		return failed(err)
	}
	checks, calicoAPIServed, err := r.verdict(ctx, s, existing, digest)
	if err != nil {
		return failed(err)
	}
	completed := ptr.To(metav1.NewTime(s.now))
	var probe *v1alpha1.ProbeStatus
	if prev := s.wr.Status.Preflight; prev != nil {
		probe = prev.Probe
		if prev.CompletedAt != nil && equality.Semantic.DeepEqual(prev.Checks, checks) {
			// The same verdicts as last time: the status says since when, and a
			// pass that finds nothing new writes nothing.
			completed = prev.CompletedAt
		}
	}
	s.wr.Status.Preflight = &v1alpha1.PreflightStatus{CompletedAt: completed, Checks: checks, Probe: probe, InputDigest: digest}
	if failed := preflight.Failed(checks); len(failed) > 0 {
		msg := "preflight failed, nothing was changed: " + summarize(failed)
		reason := conditions.ReasonPreflightFailed
		if !calicoAPIServed {
			reason = conditions.ReasonCalicoAPIUnavailable
		}
		s.set(conditions.PreflightPassed, metav1.ConditionFalse, reason, msg)
		return stop(reason, "%s", msg).lookAgain(r.opts.PreflightRetry)
	}
	s.set(conditions.PreflightPassed, metav1.ConditionUnknown, conditions.ReasonProgressing, "compatibility checks passed; probing UDP 4789")
	return done()
}

// verdict is the checks' verdict on the cluster as it is now, and whether
// projectcalico.org/v3 is served. It is the passing verdict this manager
// reached last while that still holds: the status shows it on the same
// inputs (digest, from the cache), no rerun was asked for since, and it is
// younger than the preflight's retry interval, which bounds how old a
// verdict may be on what the cache does not hold. Otherwise the checks run
// again on the cluster read past the cache; existing is the
// services-endpoint ConfigMap, nil when absent.
func (r preflightChecks) verdict(ctx context.Context, s *scope, existing *corev1.ConfigMap, digest string) ([]v1alpha1.PreflightCheck, bool, error) {
	token := string(round.TokenOf(s.wr.Annotations[RerunPreflightAnnotation]))
	if prev := s.wr.Status.Preflight; prev != nil && prev.InputDigest == digest {
		if checks, ok := r.seen.preflightHolds(s.wr.UID, digest, token, s.now, r.opts.PreflightRetry); ok {
			return checks, true, nil
		}
	}
	in, err := preflight.Gather(ctx, r.APIReader, r.Discovery, s.inst)
	if err != nil {
		return nil, false, err
	}
	if wn := s.wr.Spec.WindowsNodes; wn != nil {
		in.ExpectedWindowsNodes = wn.Expected
	}
	if in.APIServer, err = preflight.GatherAPIServer(ctx, r.APIReader, s.wr.Spec.APIServer, existing); err != nil {
		return nil, false, err
	}
	checks := preflight.Evaluate(in, s.wr.Spec.Preflight)
	r.seen.judgedPreflight(preflightVerdict{uid: s.wr.UID, digest: digest, token: token, checks: checks, at: s.now})
	return checks, in.CalicoAPIServed, nil
}

// probeFailed stops the migration on a UDP 4789 probe that failed or could
// not be started: PreflightPassed is written here alone.
func probeFailed(s *scope, msg string) Outcome {
	s.set(conditions.PreflightPassed, metav1.ConditionFalse, conditions.ReasonNetworkProbeFailed, msg)
	return stop(conditions.ReasonNetworkProbeFailed, "%s", msg)
}

// preflightPassed records a passed preflight, with its warnings.
func preflightPassed(_ context.Context, s *scope) Outcome {
	warned := preflight.Warnings(s.wr.Status.Preflight.Checks)
	if s.wr.Spec.PodNetworkCheck.Disabled {
		warned = append(warned, podCheckPreflight(s.wr.Spec.PodNetworkCheck))
	}
	if probe := s.wr.Status.Preflight.Probe; probe != nil && probe.Skipped {
		warned = append(warned, v1alpha1.PreflightCheck{Name: "NetworkProbe", Result: v1alpha1.CheckWarn,
			Message: "skipped as spec.preflight.skipNetworkProbe asks: UDP 4789 between nodes is not verified"})
	}
	if len(warned) > 0 {
		s.set(conditions.PreflightPassed, metav1.ConditionTrue, conditions.ReasonChecksPassedWithWarnings, "passed with warnings: "+summarize(warned))
		return done()
	}
	s.set(conditions.PreflightPassed, metav1.ConditionTrue, conditions.ReasonChecksPassed, "every compatibility check passed and UDP 4789 passes between nodes")
	return done()
}

func summarize(checks []v1alpha1.PreflightCheck) string {
	parts := make([]string, 0, len(checks))
	for _, c := range checks {
		parts = append(parts, c.Name+": "+c.Message)
	}
	return strings.Join(parts, "; ")
}

// RerunPreflightAnnotation asks for a new preflight: any new value does.
const RerunPreflightAnnotation = v1alpha1.RerunPreflightAnnotation
