package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
)

// Reconcile runs one pass of the migration or rollback and writes the status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	r.wakes.passBegins()
	defer func() { r.wakes.passEnds(result, err) }()
	wr, fresh, err := r.readWindowsReadiness(ctx, req.NamespacedName)
	switch {
	case stopping(ctx):
		return ctrl.Result{}, nil
	case apierrors.IsNotFound(err):
		// Gone without its finalizer (an earlier winready's, or removed by
		// hand) while it held calico-node: nothing is left to follow the
		// hold, so it ends now where admission lets it.
		return ctrl.Result{}, r.releaseOrphanedHold(ctx)
	case err != nil:
		return ctrl.Result{}, err
	}
	if wr.Name != v1alpha1.Name {
		// The CRD admits no other name; nothing to do for objects from before that rule.
		return ctrl.Result{}, nil
	}
	if !wr.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, wr)
	}
	if err := r.claim(ctx, wr); err != nil {
		return ctrl.Result{}, err
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("phase", wr.Status.Phase, "generation", wr.Generation))
	s := &scope{wr: wr, before: wr.DeepCopy(), fresh: fresh, now: r.Clock.Now()}
	if r.limiter != nil {
		s.failures = r.limiter.NumRequeues(req)
	}
	o := r.pass(ctx, s)
	if stopping(ctx) {
		return ctrl.Result{}, nil
	}
	result, err = r.conclude(ctx, s, o)
	// Every pass read this generation and wrote the conditions for it: the
	// Kubernetes convention, which kstatus, Flux and Argo CD read as "seen".
	wr.Status.ObservedGeneration = wr.Generation
	perr := r.persist(ctx, s)
	switch {
	case stopping(ctx):
		return ctrl.Result{}, nil
	case perr != nil:
		// The status could not be written: the error goes to the controller's
		// own backoff and the log, the only places left.
		return ctrl.Result{}, perr
	}
	return result, err
}

// stopping says whether the manager is stopping: what the pass did is then
// dropped, and the next manager starts from the cluster.
func stopping(ctx context.Context) bool { return ctx.Err() != nil }

// pass reads Installation default and runs the sub-reconcilers of the
// direction the spec asks for.
func (r *Reconciler) pass(ctx context.Context, s *scope) Outcome {
	inst, err := calico.GetInstallation(ctx, r.Client)
	if err != nil {
		return failed(err)
	}
	if inst == nil {
		return stop(conditions.ReasonInstallationNotFound,
			"Installation default not found: winready migrates a Calico cluster installed by the Tigera operator; install Calico with the Tigera operator first")
	}
	s.inst = inst
	var direction subReconciler = migrationDirection{r}
	if s.wr.Spec.Direction == v1alpha1.DirectionRollback {
		direction = rollbackDirection{r}
	}
	o := sequence(ctx, s, observeCalico{r}, readRecord{r}, holdRelease{r}, direction)
	writeCalicoHealthy(s)
	return o
}
