// Package controllers holds the WindowsReadiness reconciler: it builds the
// scope, runs the steps forward to migrate or backward to roll back, and
// writes the status once per reconcile.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/preflight"
)

// Defaults for intervals the spec does not set.
const (
	// DefaultGuardRetry is how soon a patch whose guard failed is retried.
	DefaultGuardRetry = 200 * time.Millisecond
	// DefaultPreflightRetry is how often a failed preflight is looked at again
	// when neither the spec nor a watched object changes.
	DefaultPreflightRetry = 5 * time.Minute
)

// Reconciler migrates the cluster to Windows-ready mode and back.
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
	// Namespace is the operator's namespace, where the originals are recorded.
	Namespace string
	// ProbeNamespace is where probe rounds run (config/probe).
	ProbeNamespace string
	// ProbeImage is the image of the probe agents: the operator's own.
	ProbeImage string
	// GuardRetry, PreflightRetry, RetryBase and RetryMax override the
	// defaults (tests shorten them).
	GuardRetry     time.Duration
	PreflightRetry time.Duration
	RetryBase      time.Duration
	RetryMax       time.Duration

	retries backoff
}

// Reconcile runs one pass of the migration or rollback and writes the status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Read past the cache: the status written by the previous reconcile must
	// be seen, or a finished step would be waited for again.
	wr := &v1alpha1.WindowsReadiness{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, wr); err != nil {
		if ctx.Err() != nil {
			// The manager is stopping: the next one starts from the cluster.
			return ctrl.Result{}, nil
		}
		if apierrors.IsNotFound(err) {
			// Deleted while it held calico-node: nothing is left to follow
			// the hold, so it ends now.
			return ctrl.Result{}, r.releaseOrphanedHold(ctx)
		}
		return ctrl.Result{}, err
	}
	if wr.Name != v1alpha1.Name {
		// The CRD admits no other name; nothing to do for objects from before that rule.
		return ctrl.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("phase", wr.Status.Phase, "generation", wr.Generation))
	p := &pass{r: r, wr: wr, before: wr.DeepCopy()}
	result, err := p.run(ctx)
	if ctx.Err() != nil {
		// The manager is stopping: the next one starts from the cluster.
		return ctrl.Result{}, nil
	}
	switch {
	case errors.Is(err, calico.ErrGuardFailed):
		// Someone else changed the Installation between read and patch: read
		// it again soon rather than report a failure.
		log.FromContext(ctx).V(1).Info("installation changed under a patch, retrying", "error", err.Error())
		err, result = nil, ctrl.Result{RequeueAfter: r.guardRetry()}
	case err != nil:
		// Any other failure of a read or write reaches the status with the
		// server's message, and is retried with a capped backoff.
		after := r.retries.next(r.retryBase(), r.retryMax())
		log.FromContext(ctx).Info("reconcile failed, retrying", "error", err.Error(), "after", after)
		p.retrying(err, after)
		if apierrors.IsServiceUnavailable(err) {
			// A 503 from projectcalico.org/v3 is the Calico API server down:
			// its APIService says why, under a reason of its own.
			p.calicoAPIServerDown(ctx, err, after)
		}
		err, result = nil, ctrl.Result{RequeueAfter: after}
	default:
		r.retries.reset()
	}
	// Every pass read this generation and wrote the conditions for it: the
	// Kubernetes convention, which kstatus, Flux and Argo CD read as "seen".
	wr.Status.ObservedGeneration = wr.Generation
	wr.Status.Phase = conditions.Phase(wr)
	metrics.RecordStatus(wr)
	if perr := p.persist(ctx); perr != nil {
		if ctx.Err() != nil {
			return ctrl.Result{}, nil
		}
		// The status could not be written: the error goes to the controller's
		// own backoff and the log, the only places left.
		return ctrl.Result{}, perr
	}
	return result, err
}

// pass is one reconcile of the WindowsReadiness.
type pass struct {
	r  *Reconciler
	wr *v1alpha1.WindowsReadiness
	// before is the status as last written, to patch only what changed.
	before *v1alpha1.WindowsReadiness
	// degraded is the first Degraded TigeraStatus of this pass, nil when
	// Calico is healthy.
	degraded *calico.Health
	// operatorDegraded are the Degraded TigeraStatuses of this pass that a
	// wait reports, calico-windows included.
	operatorDegraded []calico.Health
	// overlayConflicts are the fields of Installation overlay that win over
	// what winready writes.
	overlayConflicts []calico.OverlayField
	// overlay is Installation overlay as this pass read it, nil when absent.
	overlay *operatorv1.Installation
	// cluster is what the steps read in this pass, nil before the walk.
	cluster *calico.Cluster
}

// persist writes the status when it changed.
func (p *pass) persist(ctx context.Context) error {
	fillColumns(&p.wr.Status)
	boundStatus(&p.wr.Status)
	if equality.Semantic.DeepEqual(p.before.Status, p.wr.Status) {
		return nil
	}
	if err := p.r.Client.Status().Patch(ctx, p.wr, client.MergeFrom(p.before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing windowsreadiness status: %w", err)
	}
	p.before = p.wr.DeepCopy()
	return nil
}

func (p *pass) run(ctx context.Context) (ctrl.Result, error) {
	inst, err := calico.GetInstallation(ctx, p.r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if inst == nil {
		p.stall(conditions.ReasonInstallationNotFound,
			"Installation default not found: winready migrates a Calico cluster installed by the Tigera operator; install Calico with the Tigera operator first")
		return ctrl.Result{}, nil
	}
	if err := p.observeWindowsNodes(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if err := p.observeCalicoHealth(ctx, inst); err != nil {
		return ctrl.Result{}, err
	}
	held, err := p.releaseHold(ctx, inst)
	if err != nil {
		return ctrl.Result{}, err
	}
	var result ctrl.Result
	if p.wr.Spec.Direction == v1alpha1.DirectionRollback {
		result, err = p.rollback(ctx, inst)
	} else {
		result, err = p.migrate(ctx, inst)
	}
	if held > 0 && (result.RequeueAfter == 0 || result.RequeueAfter > held) {
		result.RequeueAfter = held
	}
	return result, err
}

// observeWindowsNodes records the Windows nodes in the status.
func (p *pass) observeWindowsNodes(ctx context.Context) error {
	names, err := windowsNodes(ctx, p.r.Client)
	if err != nil {
		return err
	}
	if len(names) > maxListedNodes {
		names = names[:maxListedNodes]
	}
	p.wr.Status.WindowsNodes = names
	return nil
}

// set sets a condition at the object's generation.
func (p *pass) set(typ string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(p.wr, typ, status, reason, message)
}

// stall records that a person is needed: nothing more happens until the spec
// or a watched object changes.
func (p *pass) stall(reason, message string) {
	p.set(conditions.Stalled, metav1.ConditionTrue, reason, message)
	p.set(conditions.Reconciling, metav1.ConditionFalse, reason, message)
	p.set(conditions.Ready, metav1.ConditionFalse, reason, message)
	p.wr.Status.Message = message
}

// progress records that work is under way.
func (p *pass) progress(reason, message string) {
	p.set(conditions.Stalled, metav1.ConditionFalse, reason, "")
	p.set(conditions.Reconciling, metav1.ConditionTrue, reason, message)
	p.set(conditions.Ready, metav1.ConditionFalse, reason, message)
	p.wr.Status.Message = message
}

// finish records that the spec's direction has been reached.
func (p *pass) finish(reason, message string) {
	p.set(conditions.Stalled, metav1.ConditionFalse, reason, "")
	p.set(conditions.Reconciling, metav1.ConditionFalse, reason, message)
	p.set(conditions.Ready, metav1.ConditionTrue, reason, message)
	p.wr.Status.Message = message
}

func (p *pass) event(eventType, reason, action, note string, args ...any) {
	if p.r.Recorder != nil {
		p.r.Recorder.Eventf(p.wr, nil, eventType, reason, action, "%s", eventNote(note, args...))
	}
}

func (r *Reconciler) guardRetry() time.Duration { return orDefault(r.GuardRetry, DefaultGuardRetry) }
func (r *Reconciler) preflightRetry() time.Duration {
	return orDefault(r.PreflightRetry, DefaultPreflightRetry)
}
func (r *Reconciler) retryBase() time.Duration { return orDefault(r.RetryBase, DefaultRetryBase) }
func (r *Reconciler) retryMax() time.Duration  { return orDefault(r.RetryMax, DefaultRetryMax) }

// orDefault is d, or def when d is not set.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// SetupWithManager watches the WindowsReadiness and everything a step waits
// for; every event wakes the one object, "default".
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	toDefault := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Name: v1alpha1.Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("windowsreadiness").
		// Errors the reconciler cannot put into the status (reading the object,
		// writing its status) back off as its own do: capped at a minute.
		WithOptions(controller.Options{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[ctrl.Request](
			r.retryBase(), r.retryMax())}).
		For(&v1alpha1.WindowsReadiness{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&operatorv1.Installation{}, toDefault).
		Watches(&operatorv1.TigeraStatus{}, toDefault).
		Watches(&appsv1.DaemonSet{}, toDefault).
		Watches(&corev1.ConfigMap{}, toDefault).
		WatchesMetadata(&corev1.Node{}, toDefault, builder.WithPredicates(predicate.Or(windowsNodeChanged(), windowsNodeUpdated(), tunnelAddressAppeared()))).
		// The calico-node-windows pods, as CacheOptions selects them.
		Watches(&corev1.Pod{}, toDefault).
		Complete(r)
}
