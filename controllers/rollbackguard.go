package controllers

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// rollbackGuard refuses a rollback while Windows nodes exist, and stops the
// node rounds a migration left running.
type rollbackGuard struct{ *Reconciler }

func (r rollbackGuard) reconcile(ctx context.Context, s *scope) Outcome {
	if o := windowsNodesJoined(s); !o.Done() {
		return o
	}
	s.set(conditions.RollbackAllowed, metav1.ConditionTrue, conditions.ReasonNoWindowsNodes, "no Windows node has joined")
	if err := r.cancelRounds(ctx, s); err != nil {
		return failed(err)
	}
	return done()
}

// windowsNodesJoined stops a rollback while Windows nodes exist: before its
// first change it is refused; midway it stops between two steps.
func windowsNodesJoined(s *scope) Outcome {
	nodes := s.windowsNodes
	if len(nodes) == 0 {
		return done()
	}
	msg := windowsNodesMessage(nodes[:min(len(nodes), maxListedNodes)])
	started := slices.ContainsFunc(s.wr.Status.Steps, func(st v1alpha1.StepStatus) bool {
		return st.State == v1alpha1.StepReverting || st.State == v1alpha1.StepReverted
	})
	if started {
		msg += "; the rollback stopped between two steps (see status.steps): " +
			"set spec.direction: Migrate to finish the migration, or remove the Windows nodes to continue the rollback"
	} else {
		msg += "; remove them (kubectl delete node) to roll back, or set spec.direction: Migrate"
	}
	s.set(conditions.RollbackAllowed, metav1.ConditionFalse, conditions.ReasonWindowsNodesPresent, msg)
	if !started {
		msg = "rollback refused, nothing was changed by it: " + msg
	}
	return stop(conditions.ReasonWindowsNodesPresent, "%s", msg)
}
