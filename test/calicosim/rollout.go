package calicosim

import (
	"context"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// rolloutController plays the DaemonSet controller (pkg/controller/daemon/update.go, rollingUpdate without
// surge) for the DaemonSets in Options.DaemonSetNamespaces. There are no pods, only counts per template: a new
// template replaces up to maxUnavailable pods at once (the strategy's rollingUpdate.maxUnavailable, scaled to
// the desired nodes and rounded up), and each replaced pod becomes available RolloutStep later. So the pace is
// RolloutStep per node at maxUnavailable 1, and maxUnavailable nodes per RolloutStep above it.
//
// As in the real controller, a node's pod is replaced only when it runs an older template than the current one:
// a template that changes again before any pod was replaced rolls out once, while a change in the middle of a
// rollout replaces the pods being replaced at once and then every node again. Rollouts and pod replacements
// are counted (RolloutStats). Updated counts the nodes whose new pod is available (the real
// updatedNumberScheduled also counts the new pods still starting; those show here as unavailable only).
//
// The progress lives in the DaemonSet status, so a restarted simulator carries on where the last one stopped;
// the pods being replaced are kept in memory only (a restart starts their replacement afresh).
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
	nodes, err := r.desiredNodes(ctx, ds)
	if err != nil {
		return finish(err)
	}
	desired := int32(len(nodes))
	now := r.sim.opts.Clock.Now()
	rc, seen := r.lastStep[ds.UID]
	if !seen {
		rc = resume(ds, desired)
		rc.seedBook(nodes)
	}
	rc.pass(&r.sim.rolloutStats, req.NamespacedName, templateHash(ds), nodes, now,
		maxUnavailable(ds, desired), r.sim.rolloutStep(), r.sim.rolloutsHeld())
	r.lastStep[ds.UID] = rc
	if ds.Namespace == calicoNamespace && ds.Name == nodeDaemonSet {
		if err := r.writePods(ctx, ds, &rc); err != nil {
			return finish(err)
		}
	}

	st := ds.Status
	unavailable := int32(len(rc.replacing))
	st.ObservedGeneration = ds.Generation
	st.DesiredNumberScheduled = desired
	st.CurrentNumberScheduled = desired
	st.NumberMisscheduled = 0
	st.UpdatedNumberScheduled = rc.done
	st.NumberReady = desired - unavailable
	st.NumberAvailable = desired - unavailable
	st.NumberUnavailable = unavailable
	var werr error
	if !equality.Semantic.DeepEqual(st, ds.Status) {
		ds.Status = st
		werr = r.sim.updateStatus(ctx, ds)
	}
	if len(rc.replacing) == 0 {
		return finish(werr)
	}
	next := rc.replacing[0].Add(r.sim.rolloutStep())
	return finish(werr, max(next.Sub(now), minStatusInterval))
}

// minStatusInterval bounds how often a rollout's status is written, so that
// a rollout over thousands of nodes does not write thousands of statuses.
const minStatusInterval = 10 * time.Millisecond

// desiredNodes names the nodes the pod template's nodeSelector picks (taints are ignored: calico tolerates all).
func (r *rolloutController) desiredNodes(ctx context.Context, ds *appsv1.DaemonSet) ([]string, error) {
	// From the cache: the Node watch keeps it current, and listing thousands
	// of nodes from the API server at every step would be the bottleneck.
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes); err != nil {
		return nil, err
	}
	selector := labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)
	var names []string
	for _, node := range nodes.Items {
		if selector.Matches(labels.Set(node.Labels)) {
			names = append(names, node.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Labels the real DaemonSet controller puts on the pods it creates: the
// template generation (the DaemonSet's deprecated.daemonset.template.generation
// annotation, which the API server raises with every change of the
// template) and the ControllerRevision's hash.
const (
	templateGenerationAnnotation = appsv1.DeprecatedTemplateGeneration
	templateGenerationLabel      = extensionsv1beta1.DaemonSetTemplateGenerationKey
	revisionHashLabel            = appsv1.ControllerRevisionHashLabelKey
)

// writePods writes calico-node's Pod on each node a rollout replaced, once
// its new pod is available: placed on the node, labelled with the template
// generation and hash as the real controller labels it, Ready. A node no
// rollout touched has no Pod object here (it runs a template older than any
// the simulator wrote).
func (r *rolloutController) writePods(ctx context.Context, ds *appsv1.DaemonSet, rc *rolloutClock) error {
	generation := ds.Annotations[templateGenerationAnnotation]
	for _, node := range rc.pods.podsToWrite(rc.hash, generation) {
		if err := r.writePod(ctx, ds, node, generation, rc.hash); err != nil {
			return err
		}
		rc.pods.wrote(node, generation)
	}
	return nil
}

func (r *rolloutController) writePod(ctx context.Context, ds *appsv1.DaemonSet, node, generation, hash string) error {
	labels := maps.Clone(ds.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[templateGenerationLabel], labels[revisionHashLabel] = generation, hash
	key := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name + "-" + node}
	pod := &corev1.Pod{}
	err := r.sim.reader.Get(ctx, key, pod)
	switch {
	case apierrors.IsNotFound(err):
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels},
			Spec: *ds.Spec.Template.Spec.DeepCopy()}
		pod.Spec.NodeName = node
		if err := controllerutil.SetControllerReference(ds, pod, r.client.Scheme()); err != nil {
			return err
		}
		if err := r.sim.create(ctx, pod); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		// The pod of an older template, replaced: the new one under the same name.
		pod.Labels = labels
		if err := r.sim.update(ctx, pod); err != nil {
			return err
		}
	}
	if runningReady(pod) {
		// The pod of an older template was running and ready, and its
		// replacement is: its status stays as it is, and writing it again
		// would change nothing.
		return nil
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}}
	return r.sim.updateStatus(ctx, pod)
}

// runningReady says whether pod is running with its containers and itself
// ready, as writePod leaves it.
func runningReady(pod *corev1.Pod) bool {
	ready := func(t corev1.PodConditionType) bool {
		return slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == t && c.Status == corev1.ConditionTrue
		})
	}
	return pod.Status.Phase == corev1.PodRunning && ready(corev1.PodReady) && ready(corev1.ContainersReady)
}
