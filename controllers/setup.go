package controllers

import (
	"context"
	"fmt"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/internal/windows"
)

// NewScheme registers winready's API and every type the reconciler reads.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := calico.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// CacheOptions caches only what the reconciler reads: DaemonSets of
// calico-system, the calico-node and calico-node-windows pods (calico-node's
// stripped to their node, labels and readiness), the services-endpoint ConfigMap (watched by name, which its
// name-scoped RBAC requires), the rounds' reports in probeNamespace (not
// their plans), Nodes as metadata, IPAM blocks as their affinity alone, and
// no managedFields anywhere. The record of the originals in the operator's
// namespace is read past the cache.
func CacheOptions(probeNamespace string) cache.Options {
	apps, err := labels.NewRequirement(windows.PodLabel, selection.In, []string{windows.PodLabelValue, CalicoNodePodLabelValue})
	if err != nil {
		panic(err) // constant labels
	}
	calicoNodePods := labels.NewSelector().Add(*apps)
	reports, err := labels.NewRequirement(round.ReportLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	return cache.Options{
		DefaultTransform: stripCached,
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.DaemonSet{}: {Namespaces: map[string]cache.Config{calico.SystemNamespace: {}}},
			&corev1.Pod{}:       {Namespaces: map[string]cache.Config{calico.SystemNamespace: {LabelSelector: calicoNodePods}}},
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
				calico.OperatorNamespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", calico.ServicesEndpointConfigMap)},
				probeNamespace:           {LabelSelector: labels.NewSelector().Add(*reports)},
			}},
		},
	}
}

// Setup builds the reconciler for a manager made with NewScheme and
// CacheOptions(o.ProbeNamespace) and starts it with the manager. Its client
// counts the writes it makes (Reconciler.Writes) and carries winready's field
// manager name.
func Setup(mgr ctrl.Manager, o Options) (*Reconciler, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	if err := indexBlocks(context.Background(), mgr.GetFieldIndexer(), disco); err != nil {
		// The index spares the join watch a list of every block; without it
		// (the Calico API server down as the manager starts) the join watch
		// lists them from the API server.
		mgr.GetLogger().Info("IPAM blocks are not indexed by node; the join watch will list them", "error", err.Error())
	}
	metrics.Register()
	r := NewReconciler(Deps{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Discovery: disco,
		Recorder: mgr.GetEventRecorder("winready")}, mgr.GetScheme(), o)
	if err := r.setupWithManager(mgr); err != nil {
		return nil, err
	}
	return r, nil
}

// Deps are what a Reconciler reads, writes and reports through: a manager's
// (Setup), or a test's that calls Reconcile itself.
type Deps struct {
	// Client reads (from a cache in a manager) and writes.
	Client client.Client
	// APIReader reads past any cache.
	APIReader client.Reader
	Discovery preflight.Discovery
	Recorder  events.EventRecorder
	// Reads counts the gets and lists the reconciler makes through Client
	// (as answered from the cache) and APIReader (past it), besides
	// winready_reads_total; a counter of its own when nil.
	Reads *metrics.ReadCounter
}

// NewReconciler builds the reconciler on d with o, defaults filled in. Its
// client counts the writes it makes (Reconciler.Writes) and carries
// winready's field manager name; its reads are counted (Deps.Reads).
// Without a manager, the caller runs Reconcile; IPAM blocks are then read
// past any index.
func NewReconciler(d Deps, scheme *runtime.Scheme, o Options) *Reconciler {
	o = o.withDefaults()
	writes := metrics.NewWriteCounter(scheme)
	reads := d.Reads
	if reads == nil {
		reads = metrics.NewReadCounter(scheme)
	}
	return &Reconciler{
		Client:    client.WithFieldOwner(&metrics.CountingClient{Client: d.Client, Writes: writes, Reads: reads}, FieldOwner),
		Writes:    writes,
		APIReader: &metrics.CountingReader{Reader: d.APIReader, Reads: reads, Source: metrics.ReadFromAPIServer},
		Discovery: d.Discovery,
		Recorder:  d.Recorder,
		Clock:     o.Clock,
		opts:      o,
		// Every failed pass backs off here, and the status says until when.
		limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[ctrl.Request](o.RetryBase, o.RetryMax),
	}
}

// setupWithManager watches what Watches lists; every event that passes its
// kind's predicate wakes the one object, "default", and is counted by its
// kind (wakes.go).
func (r *Reconciler) setupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("windowsreadiness").
		WithOptions(controller.Options{RateLimiter: r.limiter})
	for _, w := range Watches() {
		gvk, err := apiutil.GVKForObject(w.Object, mgr.GetScheme())
		if err != nil {
			return err
		}
		wake, only := r.wakes.handler(gvk.Kind), builder.WithPredicates(w.Predicate)
		if w.Metadata {
			b = b.WatchesMetadata(w.Object, wake, only)
		} else {
			b = b.Watches(w.Object, wake, only)
		}
	}
	return b.Complete(r)
}
