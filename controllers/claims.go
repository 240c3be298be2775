package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/record"
)

// Every object winready writes outside its status carries its claim
// (calico.ClaimLabel), and admission requires WindowsReadiness default for
// any write to a claimed object (config/admission). The WindowsReadiness
// therefore carries calico.ClaimFinalizer from its first pass: deleted, it
// stays until winready has ended its hold of calico-node and lifted every
// claim, so that no claimed object is left without the parameter its
// policies read, which would refuse everyone's writes to it.

// claim adds the finalizer to the WindowsReadiness, before any write of the
// pass. wr is updated with the server's answer.
func (r *Reconciler) claim(ctx context.Context, wr *v1alpha1.WindowsReadiness) error {
	if controllerutil.ContainsFinalizer(wr, calico.ClaimFinalizer) {
		return nil
	}
	base := wr.DeepCopy()
	controllerutil.AddFinalizer(wr, calico.ClaimFinalizer)
	if err := r.Client.Patch(ctx, wr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding the finalizer %s to windowsreadiness %s: %w", calico.ClaimFinalizer, wr.Name, err)
	}
	r.seen.saw(wr)
	return nil
}

// release ends what a deleted WindowsReadiness left under way: the hold of
// calico-node and winready's claims, then the finalizer. The cluster keeps
// every value the migration wrote, and the record keeps the originals, for a
// WindowsReadiness applied again.
func (r *Reconciler) release(ctx context.Context, wr *v1alpha1.WindowsReadiness) error {
	if !controllerutil.ContainsFinalizer(wr, calico.ClaimFinalizer) {
		return nil
	}
	if err := r.liftClaims(ctx); err != nil {
		s := &scope{wr: wr}
		s.note(corev1.EventTypeWarning, conditions.ReasonClaimsKept, "Delete",
			"winready could not lift its claims, and keeps the WindowsReadiness until it can: %v", err)
		r.recordEvents(s)
		return fmt.Errorf("lifting winready's claims before windowsreadiness %s goes: %w", wr.Name, err)
	}
	base := wr.DeepCopy()
	controllerutil.RemoveFinalizer(wr, calico.ClaimFinalizer)
	if err := r.Client.Patch(ctx, wr, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing the finalizer %s: %w", calico.ClaimFinalizer, err))
	}
	log.FromContext(ctx).Info("claims lifted; the WindowsReadiness goes, the record of the originals stays")
	return nil
}

// liftClaims ends winready's hold of calico-node and lifts its claim from
// calico-node, the Installation, the services endpoint and the record, each
// read past the cache so that the patches' guards hold.
func (r *Reconciler) liftClaims(ctx context.Context) error {
	ds, err := calico.ReadDaemonSet(ctx, r.APIReader, calico.NodeDaemonSet)
	if err != nil {
		return err
	}
	switch {
	case calico.Ignored(ds) && calico.HeldBy(ds, FieldOwner):
		err = calico.ReleaseNode(ctx, r.Client, ds)
	case ds != nil:
		err = calico.Unclaim(ctx, r.Client, ds)
	}
	if err != nil {
		return err
	}
	metrics.RecordCalicoNodeIgnored(calico.Ignored(ds) && !calico.HeldBy(ds, FieldOwner), false)
	inst, err := calico.GetInstallation(ctx, r.APIReader)
	if err != nil {
		return err
	}
	if inst != nil {
		if err := calico.UnclaimPatch(inst).Apply(ctx, r.Client, inst); err != nil {
			return err
		}
	}
	cm, err := calico.GetServicesEndpoint(ctx, r.APIReader)
	if err != nil {
		return err
	}
	if cm != nil {
		if err := calico.Unclaim(ctx, r.Client, cm); err != nil {
			return err
		}
	}
	return record.Unclaim(ctx, r.APIReader, r.Client, r.opts.Namespace)
}
