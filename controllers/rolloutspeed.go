package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// rolloutSpeed is the rider of calico-node's pace: the change that speeds
// the rollout up joins a write that re-renders calico-node, and a plan shows
// it; restoreSpeed puts the recorded pace back once every step has settled.
type rolloutSpeed struct{}

func (rolloutSpeed) join(s *scope, t *stepTurn) {
	renders := func(n v1alpha1.StepName) bool { return slices.Contains(rendersCalicoNode, n) }
	if renders(t.step.Name()) || slices.ContainsFunc(t.batch.steps, renders) {
		t.batch.changes = append(t.batch.changes, faster(s, t.in)...)
	}
}

func (rolloutSpeed) prepare(context.Context, walk, *scope, *stepTurn) error { return nil }

func (rolloutSpeed) prove(context.Context, walk, *scope, *stepTurn) Outcome {
	return done()
}

func (rolloutSpeed) plan(s *scope, in phase.Input, plan []v1alpha1.PlannedChange) []v1alpha1.PlannedChange {
	return plannedSpeed(s, in, plan)
}

// speed is spec.rollout.maxUnavailable as the walk applies it.
func speed(s *scope) phase.RolloutSpeed {
	return phase.RolloutSpeed{Want: s.wr.Spec.Rollout.MaxUnavailable}
}

// faster is the change that speeds up the calico-node rollout a change is
// about to cause, made in the same write so that the Tigera operator renders
// both at once. A rollback is never held up by the bound: it rolls out at the
// Installation's pace then, and says so.
func faster(s *scope, in phase.Input) []calico.Change {
	if err := speed(s).Check(in); err != nil {
		s.note(corev1.EventTypeWarning, conditions.ReasonMaxUnavailableTooHigh, "Rollout",
			"calico-node rolls out at the Installation's pace: %v", err)
		return nil
	}
	return speed(s).Faster(in)
}

// speedRefused stops the migration before a change that re-renders
// calico-node when spec.rollout.maxUnavailable is above the bound.
func speedRefused(s *scope, step v1alpha1.StepName) Outcome {
	if !slices.Contains(rendersCalicoNode, step) || s.cluster == nil {
		return done()
	}
	if err := speed(s).Check(phase.Input{Cluster: s.cluster}); err != nil {
		return stop(conditions.ReasonMaxUnavailableTooHigh, "%v", err)
	}
	return done()
}

// restoreSpeed puts calico-node's maxUnavailable back to the recorded value
// once every step has settled, when the value there is still the one winready
// wrote. The update strategy is no part of the pod template, so this rolls
// nothing.
type restoreSpeed struct{ *Reconciler }

func (r restoreSpeed) reconcile(ctx context.Context, s *scope) Outcome {
	in := input(s, v1alpha1.DirectionMigrate)
	in.Cluster = s.cluster
	if len(speed(s).Restore(in, true)) == 0 {
		return done()
	}
	// The cache keeps no managedFields: who wrote the value is read live.
	live, err := calico.GetInstallation(ctx, r.APIReader)
	if err != nil || live == nil {
		return failed(fmt.Errorf("reading who set calico-node's maxUnavailable: %w", err))
	}
	changes := speed(s).Restore(in, calico.OwnedBy(live, calico.PathNodeMaxUnavailable, FieldOwner))
	if len(changes) == 0 {
		return done()
	}
	log.FromContext(ctx).Info("putting calico-node's maxUnavailable back", "to", changes[0].After())
	if err := calico.Apply(ctx, r.Client, in.Cluster, changes); err != nil {
		return failed(fmt.Errorf("putting calico-node's maxUnavailable back to %s: %w", changes[0].After(), err))
	}
	s.note(corev1.EventTypeNormal, conditions.ReasonRolloutSpeedRestored, "Rollout",
		"calico-node's maxUnavailable is back to %s, as before the rollouts", changes[0].After())
	return done()
}

// plannedSpeed shows spec.rollout.maxUnavailable in a plan: set with the
// first change that re-renders calico-node, put back once every step has
// settled.
func plannedSpeed(s *scope, in phase.Input, plan []v1alpha1.PlannedChange) []v1alpha1.PlannedChange {
	i := slices.IndexFunc(plan, func(c v1alpha1.PlannedChange) bool { return slices.Contains(rendersCalicoNode, c.Step) })
	if i < 0 {
		return plan
	}
	if in.Originals == nil || in.Originals.NodeMaxUnavailable == nil {
		// Not recorded yet: the value the record would hold is the one there.
		in.Originals = &v1alpha1.Originals{}
		phase.RecordMaxUnavailable(in.Cluster, in.Originals)
	}
	up := speed(s).Faster(in)
	if len(up) == 0 || speed(s).Check(in) != nil {
		return plan
	}
	back := up[0]
	back.Old, back.New, back.Later = up[0].New, up[0].Old, "once every step has settled"
	plan = slices.Insert(plan, i, phase.Plan(plan[i].Step, up)...)
	return append(plan, phase.Plan(plan[len(plan)-1].Step, []calico.Change{back})...)
}
