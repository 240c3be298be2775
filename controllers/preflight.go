package controllers

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/preflight"
)

// preflightChecks runs the compatibility checks and records them; a failed
// check stops the migration before any change.
type preflightChecks struct{ *Reconciler }

func (r preflightChecks) reconcile(ctx context.Context, s *scope) Outcome {
	in, err := preflight.Gather(ctx, r.APIReader, r.Discovery, s.inst)
	if err != nil {
		return failed(err)
	}
	if wn := s.wr.Spec.WindowsNodes; wn != nil {
		in.ExpectedWindowsNodes = wn.Expected
	}
	existing, err := calico.GetServicesEndpoint(ctx, r.Client)
	if err != nil {
		return failed(err)
	}
	if in.APIServer, err = preflight.GatherAPIServer(ctx, r.APIReader, s.wr.Spec.APIServer, existing); err != nil {
		return failed(err)
	}
	checks := preflight.Evaluate(in, s.wr.Spec.Preflight)
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
	s.wr.Status.Preflight = &v1alpha1.PreflightStatus{CompletedAt: completed, Checks: checks, Probe: probe}
	if failed := preflight.Failed(checks); len(failed) > 0 {
		msg := "preflight failed, nothing was changed: " + summarize(failed)
		reason := conditions.ReasonPreflightFailed
		if !in.CalicoAPIServed {
			reason = conditions.ReasonCalicoAPIUnavailable
		}
		s.set(conditions.PreflightPassed, metav1.ConditionFalse, reason, msg)
		return stop(reason, "%s", msg).lookAgain(r.opts.PreflightRetry)
	}
	s.set(conditions.PreflightPassed, metav1.ConditionUnknown, conditions.ReasonProgressing, "compatibility checks passed; probing UDP 4789")
	return done()
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
