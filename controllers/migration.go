package controllers

import (
	"context"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/phase"
)

// migrationDirection moves the cluster forward. Before the first change it runs the
// preflight, the UDP 4789 probe and the pod network check; it resolves the
// values to write and records the originals before the first change, so
// that a crash can never lose them; then it walks the steps, and once they
// are all done it follows the Windows nodes as they join.
type migrationDirection struct{ *Reconciler }

func (r migrationDirection) reconcile(ctx context.Context, s *scope) Outcome {
	steps := phase.Steps()
	return sequence(ctx, s,
		foreignRecord{r.Reconciler},
		beforeFirstChange{preflightChecks{r.Reconciler}},
		targets{r.Reconciler},
		dryRun{r.Reconciler, v1alpha1.DirectionMigrate, steps},
		beforeFirstChange{pausedBeforeChange{r.Reconciler, steps}},
		beforeFirstChange{probeRound{r.Reconciler}},
		beforeFirstChange{podCheck{r.Reconciler, BaselineCheck}},
		beforeFirstChange{subFunc(preflightPassed)},
		subFunc(clearPlan),
		originals{r.Reconciler, steps},
		subFunc(func(_ context.Context, s *scope) Outcome { return windowsNodesJoined(s, v1alpha1.DirectionMigrate) }),
		revertWorse{r.Reconciler},
		walk{Reconciler: r.Reconciler, steps: steps, dir: v1alpha1.DirectionMigrate, allowed: migrationBlocked},
		restoreSpeed{r.Reconciler},
		joinWatch{r.Reconciler},
	)
}

// clearPlan drops a dry run's plan, and its canary, once changes are made.
func clearPlan(_ context.Context, s *scope) Outcome {
	s.wr.Status.Plan = nil
	if c := s.wr.Status.Canary; c != nil && c.State == v1alpha1.CanaryPlanned {
		s.wr.Status.Canary = nil
	}
	return done()
}

// beforeFirstChange runs sub only while the migration goes on from no
// record: the checks that guard the first change are not run again midway.
// The record, written before the first change, says so; the status does
// not, since the manager's token could write originals into it to skip the
// checks.
type beforeFirstChange struct{ sub subReconciler }

func (b beforeFirstChange) reconcile(ctx context.Context, s *scope) Outcome {
	if s.adopted() {
		return done()
	}
	return b.sub.reconcile(ctx, s)
}
