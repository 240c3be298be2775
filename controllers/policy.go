package controllers

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// This file holds the decisions several sub-reconcilers share: whether a
// change may be made now in either direction, and whether Windows nodes have
// joined (the one writer of RollbackAllowed). They decide from the scope
// alone, so that the walk can ask about later steps without side effects.
// Which steps are disruptive, re-render calico-node or go in one write is
// stepkinds.go.

// migrationBlocked says why the next change may not be made now.
func migrationBlocked(s *scope, step v1alpha1.StepName) Outcome {
	if o := heldBySpec(s, step); !o.Done() {
		return o
	}
	if o := speedRefused(s, step); !o.Done() {
		return o
	}
	if o := podCheckBlocked(s, step); !o.Done() {
		return o
	}
	if o := canaryBlocked(s, step); !o.Done() {
		return o
	}
	return calicoBlocked(s, step, v1alpha1.DirectionMigrate)
}

// heldBySpec says whether the spec asks to wait before the step's change:
// paused, or a disruptive step awaiting approval.
func heldBySpec(s *scope, step v1alpha1.StepName) Outcome {
	if s.wr.Spec.Paused {
		return stop(conditions.ReasonPaused, "paused before the next change; set spec.paused: false to continue")
	}
	return awaitingApproval(s, step)
}

// awaitingApproval says whether a disruptive step waits for a person.
func awaitingApproval(s *scope, step v1alpha1.StepName) Outcome {
	what, ok := disruptive[step]
	if !ok || !s.wr.Spec.RequireApproval || slices.Contains(s.wr.Spec.ApprovedSteps, step) {
		return done()
	}
	return stop(conditions.ReasonAwaitingApproval, "waiting for approval (%s): add %s to spec.approvedSteps to go on", what, step)
}

func windowsNodesMessage(names []string) string {
	return fmt.Sprintf("Windows nodes have joined (%s): they need VXLAN without BGP, so the cluster cannot go back", strings.Join(names, ", "))
}

// rollbackBlocked says why the next rollback change may not be made now.
func rollbackBlocked(s *scope, step v1alpha1.StepName) Outcome {
	if o := heldBySpec(s, step); !o.Done() {
		return o
	}
	return calicoBlocked(s, step, v1alpha1.DirectionRollback)
}

// podCheckBlocked says why step may not be changed: the pod network got
// worse after it, and no new check was asked for. The walk's mayChange
// consults it, so that a reverted step is not applied again by itself.
func podCheckBlocked(s *scope, step v1alpha1.StepName) Outcome {
	st := s.wr.Status.PodNetworkCheck
	if st == nil || st.Last == nil || st.Last.Trigger != string(step) || !st.Last.Worse || !podCheckRerunSeen(s, st.Last) {
		return done()
	}
	return stop(ReasonPodNetworkCheckFailed, "the pod network got worse after this step; fix it, then %s", rerunPodCheckCommand())
}

// windowsNodesJoined says whether Windows nodes have joined, and writes
// RollbackAllowed, its one writer. Toward dir Migrate the pass goes on;
// toward Rollback (a rollback, or the revert of one step) it is refused
// before its first change, and midway it stops between two steps.
func windowsNodesJoined(s *scope, dir v1alpha1.Direction) Outcome {
	nodes := s.windowsNodes
	if len(nodes) == 0 {
		s.set(conditions.RollbackAllowed, metav1.ConditionTrue, conditions.ReasonNoWindowsNodes, "no Windows node has joined")
		return done()
	}
	msg := windowsNodesMessage(nodes[:min(len(nodes), maxListedNodes)])
	if dir != v1alpha1.DirectionRollback {
		s.set(conditions.RollbackAllowed, metav1.ConditionFalse, conditions.ReasonWindowsNodesPresent, msg)
		return done()
	}
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
