package controllers

import (
	"context"

	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// pausedBeforeChange holds a paused migration before the probe round and the
// first change: no agents run on the nodes while paused.
type pausedBeforeChange struct {
	*Reconciler
	steps []phase.Step
}

func (r pausedBeforeChange) reconcile(ctx context.Context, s *scope) Outcome {
	if !s.wr.Spec.Paused {
		return done()
	}
	if err := r.cancelRounds(ctx, s); err != nil {
		return failed(err)
	}
	o := stop(conditions.ReasonPaused, "paused before the UDP 4789 probe and the first change; set spec.paused: false to continue")
	return atStep(o, r.steps[0].Name(), 1, len(r.steps))
}
