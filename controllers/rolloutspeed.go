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

// speed is spec.rollout.maxUnavailable as the walk applies it.
func (p *pass) speed() phase.RolloutSpeed {
	return phase.RolloutSpeed{Want: p.wr.Spec.Rollout.MaxUnavailable}
}

// faster is the change that speeds up the calico-node rollout a change is
// about to cause, made in the same write so that the Tigera operator renders
// both at once. A rollback is never held up by the bound: it rolls out at the
// Installation's pace then, and says so.
func (p *pass) faster(in phase.Input) []calico.Change {
	if err := p.speed().Check(in); err != nil {
		p.event(corev1.EventTypeWarning, conditions.ReasonMaxUnavailableTooHigh, "Rollout",
			"calico-node rolls out at the Installation's pace: %v", err)
		return nil
	}
	return p.speed().Faster(in)
}

// speedRefused stops the migration before a change that re-renders
// calico-node when spec.rollout.maxUnavailable is above the bound.
func (p *pass) speedRefused(step v1alpha1.StepName) *phase.Outcome {
	if !slices.Contains(rendersCalicoNode, step) || p.cluster == nil {
		return nil
	}
	if err := p.speed().Check(phase.Input{Cluster: p.cluster}); err != nil {
		o := phase.BlockedBy(conditions.ReasonMaxUnavailableTooHigh, err.Error())
		return &o
	}
	return nil
}

// restoreSpeed puts calico-node's maxUnavailable back to the recorded value
// once every step has settled, when the value there is still the one winready
// wrote. The update strategy is no part of the pod template, so this rolls
// nothing.
func (p *pass) restoreSpeed(ctx context.Context, in phase.Input) *phase.Outcome {
	if len(p.speed().Restore(in, true)) == 0 {
		return nil
	}
	// The cache keeps no managedFields: who wrote the value is read live.
	live, err := calico.GetInstallation(ctx, p.r.APIReader)
	if err != nil || live == nil {
		o := phase.FailedWith(fmt.Errorf("reading who set calico-node's maxUnavailable: %w", err))
		return &o
	}
	changes := p.speed().Restore(in, calico.OwnedBy(live, calico.PathNodeMaxUnavailable, FieldOwner))
	if len(changes) == 0 {
		return nil
	}
	log.FromContext(ctx).Info("putting calico-node's maxUnavailable back", "to", changes[0].After())
	if err := calico.Apply(ctx, p.r.Client, in.Cluster, changes); err != nil {
		o := phase.FailedWith(fmt.Errorf("putting calico-node's maxUnavailable back to %s: %w", changes[0].After(), err))
		return &o
	}
	p.event(corev1.EventTypeNormal, "RolloutSpeedRestored", "Rollout",
		"calico-node's maxUnavailable is back to %s, as before the rollouts", changes[0].After())
	return nil
}

// plannedSpeed shows spec.rollout.maxUnavailable in a plan: set with the
// first change that re-renders calico-node, put back once every step has
// settled.
func (p *pass) plannedSpeed(in phase.Input, plan []v1alpha1.PlannedChange) []v1alpha1.PlannedChange {
	i := slices.IndexFunc(plan, func(c v1alpha1.PlannedChange) bool { return slices.Contains(rendersCalicoNode, c.Step) })
	if i < 0 {
		return plan
	}
	if in.Originals == nil || in.Originals.NodeMaxUnavailable == nil {
		// Not recorded yet: the value the record would hold is the one there.
		in.Originals = &v1alpha1.Originals{}
		phase.RecordMaxUnavailable(in.Cluster, in.Originals)
	}
	up := p.speed().Faster(in)
	if len(up) == 0 || p.speed().Check(in) != nil {
		return plan
	}
	back := up[0]
	back.Old, back.New, back.Later = up[0].New, up[0].Old, "once every step has settled"
	plan = slices.Insert(plan, i, phase.Plan(plan[i].Step, up)...)
	return append(plan, phase.Plan(plan[len(plan)-1].Step, []calico.Change{back})...)
}
