package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// migration moves the cluster forward. Before the first change it runs the
// preflight, the UDP 4789 probe and the pod network check; it resolves the
// values to write and records the originals before the first change, so
// that a crash can never lose them; then it walks the steps, and once they
// are all done it follows the Windows nodes as they join.
type migration struct{ *Reconciler }

func (r migration) reconcile(ctx context.Context, s *scope) Outcome {
	steps := phase.Steps()
	return sequence(ctx, s,
		beforeFirstChange{preflightChecks{r.Reconciler}},
		beforeFirstChange{dryRun{r.Reconciler, v1alpha1.DirectionMigrate, steps}},
		beforeFirstChange{pausedBeforeChange{r.Reconciler, steps}},
		beforeFirstChange{probeRound{r.Reconciler}},
		beforeFirstChange{podCheck{r.Reconciler, BaselineCheck}},
		beforeFirstChange{subFunc(preflightPassed)},
		subFunc(clearPlan),
		targets{r.Reconciler},
		originals{r.Reconciler, steps},
		subFunc(rollbackAllowed),
		dryRun{r.Reconciler, v1alpha1.DirectionMigrate, steps},
		revertWorse{r.Reconciler},
		walk{Reconciler: r.Reconciler, steps: steps, dir: v1alpha1.DirectionMigrate, allowed: migrationBlocked},
		joinWatch{r.Reconciler},
	)
}

// clearPlan drops a dry run's plan once changes are made.
func clearPlan(_ context.Context, s *scope) Outcome {
	s.wr.Status.Plan = nil
	return done()
}

// beforeFirstChange runs sub only while no original is recorded: the checks
// that guard the first change are not run again midway.
type beforeFirstChange struct{ sub subReconciler }

func (b beforeFirstChange) reconcile(ctx context.Context, s *scope) Outcome {
	if s.wr.Status.Originals != nil {
		return done()
	}
	return b.sub.reconcile(ctx, s)
}

// rollbackAllowed says, once per pass, whether the migration could be rolled
// back now: not once a Windows node has joined.
func rollbackAllowed(_ context.Context, s *scope) Outcome {
	if len(s.wr.Status.WindowsNodes) > 0 {
		s.set(conditions.RollbackAllowed, metav1.ConditionFalse, conditions.ReasonWindowsNodesPresent, windowsNodesMessage(s.wr.Status.WindowsNodes))
	} else {
		s.set(conditions.RollbackAllowed, metav1.ConditionTrue, conditions.ReasonNoWindowsNodes, "no Windows node has joined")
	}
	return done()
}

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

// disruptive are the steps that move traffic: pools change encapsulation,
// calico-node restarts on every node.
var disruptive = map[v1alpha1.StepName]string{
	v1alpha1.StepEncapsulation:    "pod traffic between nodes moves to VXLAN everywhere",
	v1alpha1.StepBGP:              "calico-node restarts on every node and BGP sessions end",
	v1alpha1.StepServicesEndpoint: "calico-node restarts on every node",
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
