package calicosim

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// rolloutController plays the DaemonSet controller for the DaemonSets in Options.DaemonSetNamespaces: there are
// no pods, only the status a rolling update with maxUnavailable 1 would show. A new template (metadata.generation
// above status.observedGeneration) starts a rollout at 0 updated nodes; every RolloutStep one more node is updated;
// while it rolls, one node is unavailable.
//
// The progress lives in the DaemonSet status itself, so a restarted simulator carries on where the last one
// stopped; only the time of the last step is kept in memory (a restart just takes the next step at once).
type rolloutController struct {
	sim      *Simulator
	client   client.Client
	lastStep map[types.UID]rolloutClock
}

func (r *rolloutController) setup(mgr ctrl.Manager) error {
	r.client = mgr.GetClient()
	managed := inNamespace(r.sim.opts.DaemonSetNamespaces...)
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-daemonset").
		WithOptions(controllerOptions()).
		For(&appsv1.DaemonSet{}, builder.WithPredicates(managed)).
		// A node joining or leaving changes how many pods a DaemonSet wants.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allDaemonSets)).
		Complete(r)
}

func (r *rolloutController) allDaemonSets(ctx context.Context, _ client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, ns := range r.sim.opts.DaemonSetNamespaces {
		list := &appsv1.DaemonSetList{}
		if err := r.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			continue
		}
		for _, ds := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ds)})
		}
	}
	return reqs
}

func (r *rolloutController) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	ds := &appsv1.DaemonSet{}
	if err := r.sim.reader.Get(ctx, req.NamespacedName, ds); err != nil {
		return finish(client.IgnoreNotFound(err))
	}
	desired, err := r.desiredNodes(ctx, ds)
	if err != nil {
		return finish(err)
	}

	now := time.Now()
	st := ds.Status
	updated := st.UpdatedNumberScheduled
	if ds.Generation != st.ObservedGeneration {
		// A new template: no pod runs it yet.
		st.ObservedGeneration = ds.Generation
		updated = 0
		r.lastStep[ds.UID] = rolloutClock{at: now}
	} else {
		updated = min(updated, desired)
		rc, ok := r.lastStep[ds.UID]
		if !ok || r.sim.rolloutsHeld() {
			// Resume from the status after a restart; a held rollout's
			// clock stands still.
			rc = rolloutClock{at: now, from: updated}
			r.lastStep[ds.UID] = rc
		}
		// One node every RolloutStep since the rollout (or its resumption)
		// started; a status write may cover several nodes, as the real
		// DaemonSet controller's do.
		updated = min(desired, rc.from+int32(now.Sub(rc.at)/r.sim.opts.RolloutStep))
	}
	var unavailable int32
	if updated < desired {
		unavailable = 1
	}
	st.DesiredNumberScheduled = desired
	st.CurrentNumberScheduled = desired
	st.NumberMisscheduled = 0
	st.UpdatedNumberScheduled = updated
	st.NumberReady = desired - unavailable
	st.NumberAvailable = desired - unavailable
	st.NumberUnavailable = unavailable

	var err2 error
	if !equality.Semantic.DeepEqual(st, ds.Status) {
		ds.Status = st
		err2 = r.sim.updateStatus(ctx, ds)
	}
	if updated >= desired {
		delete(r.lastStep, ds.UID)
		return finish(err2)
	}
	rc := r.lastStep[ds.UID]
	next := rc.at.Add(time.Duration(updated-rc.from+1) * r.sim.opts.RolloutStep)
	return finish(err2, max(next.Sub(now), minStatusInterval))
}

// minStatusInterval bounds how often a rollout's status is written, so that
// a rollout over thousands of nodes does not write thousands of statuses.
const minStatusInterval = 10 * time.Millisecond

// rolloutClock is when a rollout started (or resumed) and from how many
// updated nodes.
type rolloutClock struct {
	at   time.Time
	from int32
}

// desiredNodes counts the nodes the pod template's nodeSelector picks (taints are ignored: calico tolerates all).
func (r *rolloutController) desiredNodes(ctx context.Context, ds *appsv1.DaemonSet) (int32, error) {
	// From the cache: the Node watch keeps it current, and listing thousands
	// of nodes from the API server at every step would be the bottleneck.
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes); err != nil {
		return 0, err
	}
	selector := labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)
	var n int32
	for _, node := range nodes.Items {
		if selector.Matches(labels.Set(node.Labels)) {
			n++
		}
	}
	return n, nil
}
