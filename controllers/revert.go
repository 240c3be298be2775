package controllers

import (
	"context"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/phase"
)

// revertWorse takes back the step after which the pod network got worse,
// as a rollback of that step alone would, then stops with the diagnosis
// (spec.podNetworkCheck.onFailure: Revert).
type revertWorse struct{ *Reconciler }

func (r revertWorse) reconcile(ctx context.Context, s *scope) Outcome {
	name, due := podCheckRevertDue(s)
	if !due {
		return done()
	}
	for _, step := range phase.Steps() {
		if step.Name() != name {
			continue
		}
		w := walk{Reconciler: r.Reconciler, steps: []phase.Step{step}, dir: v1alpha1.DirectionRollback, allowed: rollbackBlocked}
		if o := sequence(ctx, s, w, restoreSpeed{r.Reconciler}); !o.Done() {
			return o
		}
	}
	return podCheckReverted(s, name)
}
