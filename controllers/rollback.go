package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
	"github.com/winready/winready/internal/record"
)

// rollback runs the steps backwards and restores the recorded originals. It is
// refused while any Windows node exists: such a node does not work with BGP
// and cross-subnet VXLAN.
func (p *pass) rollback(ctx context.Context, inst *operatorv1.Installation) (ctrl.Result, error) {
	if nodes := p.wr.Status.WindowsNodes; len(nodes) > 0 {
		msg := windowsNodesMessage(nodes) + "; remove them (kubectl delete node) to roll back, or set spec.direction: Migrate"
		p.set(conditions.RollbackAllowed, metav1.ConditionFalse, conditions.ReasonWindowsNodesPresent, msg)
		if !p.alreadyStalled(conditions.ReasonWindowsNodesPresent) {
			p.event(corev1.EventTypeWarning, conditions.ReasonWindowsNodesPresent, "Rollback", "%s", msg)
		}
		p.stall(conditions.ReasonWindowsNodesPresent, "rollback refused, nothing was changed by it: "+msg)
		return ctrl.Result{}, nil
	}
	p.set(conditions.RollbackAllowed, metav1.ConditionTrue, conditions.ReasonNoWindowsNodes, "no Windows node has joined")
	if err := errors.Join(p.stopProbe(ctx), p.stopPodCheck(ctx)); err != nil {
		return ctrl.Result{}, err
	}
	// The durable record wins over the status: it outlives a deleted and
	// re-applied WindowsReadiness.
	saved, err := record.Load(ctx, p.r.APIReader, p.r.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Originals written by an earlier winready are completed as Load completes
	// a record, so that the two compare equal.
	if err := record.Complete(ctx, p.r.APIReader, p.wr.Status.Originals); err != nil {
		return ctrl.Result{}, err
	}
	if saved != nil && !equality.Semantic.DeepEqual(saved, p.wr.Status.Originals) {
		p.wr.Status.Originals = saved
		p.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredRecord,
			fmt.Sprintf("read back from ConfigMap %s/%s, recorded before the first change", p.r.Namespace, record.Name))
	}
	if p.wr.Status.Originals == nil {
		// Either a finished rollback cleared them, or no change was ever made.
		if ready := meta.FindStatusCondition(p.wr.Status.Conditions, conditions.Ready); ready != nil &&
			ready.Status == metav1.ConditionTrue && ready.Reason == conditions.ReasonRolledBack {
			p.finish(conditions.ReasonRolledBack, ready.Message)
			return ctrl.Result{}, nil
		}
		p.finish(conditions.ReasonNothingToRollBack, "nothing to roll back: the migration changed nothing")
		return ctrl.Result{}, nil
	}

	// A rollback never restores a value it does not know.
	if unknown := record.Unknown(p.wr.Status.Originals, p.r.Namespace); len(unknown) > 0 {
		msg := "the rollback stopped before its first change: the originals, recorded by an earlier winready, lack " +
			strings.Join(unknown, "; ")
		if !p.alreadyStalled(conditions.ReasonOriginalsIncomplete) {
			p.event(corev1.EventTypeWarning, conditions.ReasonOriginalsIncomplete, "Rollback", "%s", msg)
		}
		p.stall(conditions.ReasonOriginalsIncomplete, msg)
		return ctrl.Result{}, nil
	}

	steps := slices.Clone(phase.Steps())
	slices.Reverse(steps)
	in := p.input(inst, v1alpha1.DirectionRollback)
	if p.wr.Spec.DryRun {
		return ctrl.Result{}, p.planOnly(ctx, in, steps)
	}
	p.wr.Status.Plan = nil
	if o := p.walk(ctx, in, steps, p.rollbackBlocked); o.Kind != phase.Done {
		return p.conclude(ctx, o)
	}
	// Every recorded value is back; a later migration records them afresh.
	if err := record.Delete(ctx, p.r.Client, p.r.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	p.wr.Status.Originals = nil
	p.wr.Status.Targets = nil
	p.event(corev1.EventTypeNormal, conditions.ReasonRolledBack, "Rollback", "every value the migration changed is restored")
	p.finish(conditions.ReasonRolledBack, "every value the migration changed is restored")
	return ctrl.Result{}, nil
}

// rollbackBlocked says why the next rollback change may not be made now. The
// Windows nodes are looked at again before every change, so a node that joins
// midway stops the rollback between two steps.
func (p *pass) rollbackBlocked(ctx context.Context, step v1alpha1.StepName) *phase.Outcome {
	if o := p.heldBySpec(step); o != nil {
		return o
	}
	// Read past the cache: a node that registered a moment ago counts.
	nodes, err := windowsNodes(ctx, p.r.APIReader)
	if err != nil {
		o := phase.FailedWith(err)
		return &o
	}
	if len(nodes) > 0 {
		msg := windowsNodesMessage(nodes) + "; the rollback stopped between two steps (see status.steps): " +
			"set spec.direction: Migrate to finish the migration, or remove the Windows nodes to continue the rollback"
		p.set(conditions.RollbackAllowed, metav1.ConditionFalse, conditions.ReasonWindowsNodesPresent, msg)
		o := phase.BlockedBy(conditions.ReasonWindowsNodesPresent, msg)
		return &o
	}
	return p.calicoBlocked(step, v1alpha1.DirectionRollback)
}
