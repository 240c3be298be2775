package controllers

import (
	"context"
	"slices"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// rollbackDirection runs the steps backwards and restores the recorded originals. It
// is refused while any Windows node exists: such a node does not work with
// BGP and cross-subnet VXLAN.
type rollbackDirection struct{ *Reconciler }

func (r rollbackDirection) reconcile(ctx context.Context, s *scope) Outcome {
	steps := slices.Clone(phase.Steps())
	slices.Reverse(steps)
	return sequence(ctx, s,
		rollbackGuard{r.Reconciler},
		foreignRecord{r.Reconciler},
		recordedOriginals{r.Reconciler},
		dryRun{r.Reconciler, v1alpha1.DirectionRollback, steps},
		subFunc(clearPlan),
		walk{Reconciler: r.Reconciler, steps: steps, dir: v1alpha1.DirectionRollback, allowed: rollbackBlocked},
		restoreSpeed{r.Reconciler},
		rolledBack{r.Reconciler},
	)
}

// rolledBack ends a rollback whose every step is back: the record goes, and
// a later migration records the originals afresh.
type rolledBack struct{ *Reconciler }

func (r rolledBack) reconcile(ctx context.Context, s *scope) Outcome {
	// The status stops showing the originals before the record goes: the
	// other order could leave originals on show that no record holds, which
	// the next pass would stop on (foreignRecord).
	s.wr.Status.Originals = nil
	s.wr.Status.Targets = nil
	if err := r.checkpoint(ctx, s, "deleting the record"); err != nil {
		return failed(err)
	}
	if err := r.deleteRecord(ctx, s); err != nil {
		return failed(err)
	}
	return stop(conditions.ReasonRolledBack, "every value the migration changed is restored")
}
