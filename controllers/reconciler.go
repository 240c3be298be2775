// Package controllers holds the WindowsReadiness reconciler. A pass reads
// the object and the Installation into a scope, runs the sub-reconcilers in
// order (observe, the hold of calico-node, then the migration's or the
// rollback's: preflight, probe round, pod check, targets, originals, walk,
// join watch), and stops at the first that is not done. conclude turns that
// outcome into the conditions, the Events and the result; the status is
// written once, at the end of the pass, plus the named checkpoints where a
// record must be durable before the pass goes on.
package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/preflight"
)

// Reconciler migrates the cluster to Windows-ready mode and back. Setup
// builds it.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server objects that are not cached.
	APIReader client.Reader
	// Discovery finds out whether projectcalico.org/v3 is served.
	Discovery preflight.Discovery
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Writes counts the writes Client makes.
	Writes *metrics.WriteCounter

	opts    Options
	limiter workqueue.TypedRateLimiter[ctrl.Request]
	// wakes counts each pass by what woke it.
	wakes wakes
	// seen keeps the newest WindowsReadiness and record this manager knows.
	seen seen
}

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
	var direction subReconciler = migration{r}
	if s.wr.Spec.Direction == v1alpha1.DirectionRollback {
		direction = rollback{r}
	}
	o := sequence(ctx, s, observe{r}, readRecord{r}, holdRelease{r}, direction)
	writeCalicoHealthy(s)
	return o
}

// persist writes the status when it changed: once at the end of a pass, and
// at each checkpoint.
func (r *Reconciler) persist(ctx context.Context, s *scope) error {
	s.wr.Status.Phase = conditions.Phase(s.wr)
	metrics.RecordStatus(s.wr)
	fillColumns(&s.wr.Status)
	boundStatus(&s.wr.Status)
	if equality.Semantic.DeepEqual(s.before.Status, s.wr.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, s.wr, client.MergeFrom(s.before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing windowsreadiness status: %w", err)
	}
	// The next pass finds this version in the cache, or reads past it.
	r.seen.saw(s.wr)
	s.before = s.wr.DeepCopy()
	return nil
}

// checkpoint writes the status in the middle of a pass, where what it holds
// must be durable before the pass goes on: why names the moment (the
// originals before the first change, a round's result before its reports are
// deleted).
func (r *Reconciler) checkpoint(ctx context.Context, s *scope, why string) error {
	if err := r.persist(ctx, s); err != nil {
		return fmt.Errorf("saving the status before %s: %w", why, err)
	}
	return nil
}
