package controllers

import (
	"context"
	"fmt"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// dryRun writes into status.plan every change the steps would still make
// toward dir, from the cluster as it is, and changes nothing: a dry run holds
// at any moment, midway and for a rollback too.
type dryRun struct {
	*Reconciler
	dir   v1alpha1.Direction
	steps []phase.Step
}

// maxPlan is the CRD's bound on status.plan.
const maxPlan = 64

func (r dryRun) reconcile(ctx context.Context, s *scope) Outcome {
	if !s.wr.Spec.DryRun {
		return done()
	}
	// A dry run changes nothing and runs no agents.
	if err := r.cancelRounds(ctx, s); err != nil {
		return failed(err)
	}
	plan, err := r.plan(ctx, s)
	if err != nil {
		return failed(err)
	}
	s.wr.Status.Plan = plan
	what := "the migration"
	if r.dir == v1alpha1.DirectionRollback {
		what = "the rollback"
	}
	msg := fmt.Sprintf("dry run: %d changes of %s planned in status.plan, none made; set spec.dryRun: false to apply them", len(plan), what)
	if !s.adopted() {
		msg += "; the UDP 4789 probe runs then"
	}
	if c := s.wr.Status.Canary; c != nil && c.State == v1alpha1.CanaryPlanned {
		msg += fmt.Sprintf("; calico-node's rollout begins with a canary of %d nodes (status.canary)", c.Size)
	}
	return stop(conditions.ReasonDryRun, "%s", msg)
}

// plan is every change the steps would make toward dir, in order.
func (r dryRun) plan(ctx context.Context, s *scope) ([]v1alpha1.PlannedChange, error) {
	in := input(s, r.dir)
	var plan []v1alpha1.PlannedChange
	for _, step := range r.steps {
		if err := step.Read(ctx, r.readers(), in.Cluster); err != nil {
			return nil, fmt.Errorf("planning %s: %w", step.Name(), err)
		}
		plan = append(plan, phase.Plan(step.Name(), step.Diff(in))...)
	}
	for _, r := range riders {
		plan = r.plan(s, in, plan)
	}
	if len(plan) > maxPlan {
		plan = plan[:maxPlan]
	}
	return plan, nil
}
