package controllers

import (
	"context"

	"github.com/winready/winready/api/v1alpha1"
)

// rollbackGuard refuses a rollback while Windows nodes exist, and stops the
// node rounds a migration left running.
type rollbackGuard struct{ *Reconciler }

func (r rollbackGuard) reconcile(ctx context.Context, s *scope) Outcome {
	if o := windowsNodesJoined(s, v1alpha1.DirectionRollback); !o.Done() {
		return o
	}
	if err := r.cancelRounds(ctx, s); err != nil {
		return failed(err)
	}
	return done()
}
