package controllers

import (
	"context"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/phase"
)

// revertWorse takes back what made the pod network worse, as a rollback of
// those steps alone would, then stops with the diagnosis: every step of the
// write whose canary failed (canary.go), or the step after which the pod
// network check found it worse (spec.podNetworkCheck.onFailure: Revert).
type revertWorse struct{ *Reconciler }

func (r revertWorse) reconcile(ctx context.Context, s *scope) Outcome {
	if names, due := canaryRevertDue(s); due {
		if o := r.revert(ctx, s, names); !o.Done() {
			return o
		}
		s.wr.Status.Canary.Reverted = true
		return canaryFailed(s)
	}
	name, due := podCheckRevertDue(s)
	if !due {
		return done()
	}
	if o := r.revert(ctx, s, []v1alpha1.StepName{name}); !o.Done() {
		return o
	}
	return podCheckReverted(s, name)
}

// revert walks names toward Rollback, in the order given.
func (r revertWorse) revert(ctx context.Context, s *scope, names []v1alpha1.StepName) Outcome {
	var steps []phase.Step
	for _, name := range names {
		for _, step := range phase.Steps() {
			if step.Name() == name {
				steps = append(steps, step)
			}
		}
	}
	w := walk{Reconciler: r.Reconciler, steps: steps, dir: v1alpha1.DirectionRollback, allowed: rollbackBlocked}
	return sequence(ctx, s, w, restoreSpeed{r.Reconciler})
}
