package controllers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/windows"
)

// FieldOwner is winready's field manager name in managedFields.
const FieldOwner = "winready"

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
// calico-system, the services-endpoint ConfigMap (watched by name, which its
// name-scoped RBAC requires), the probe reports in probeNamespace, Nodes as
// metadata, and no managedFields anywhere. The record of the originals in the
// operator's namespace is read past the cache.
func CacheOptions(probeNamespace string) cache.Options {
	reports, err := labels.NewRequirement(preflight.ReportLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.DaemonSet{}: {Namespaces: map[string]cache.Config{calico.SystemNamespace: {}}},
			&corev1.Pod{}: {Namespaces: map[string]cache.Config{calico.SystemNamespace: {
				LabelSelector: labels.SelectorFromSet(labels.Set{windows.PodLabel: windows.PodLabelValue})}}},
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
				calico.OperatorNamespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", calico.ServicesEndpointConfigMap)},
				probeNamespace:           {LabelSelector: labels.NewSelector().Add(*reports)},
			}},
		},
	}
}

// NewReconciler builds the reconciler for a manager made with NewScheme and
// CacheOptions; call SetupWithManager to start it with the manager. Its
// client counts the writes it makes (Writes). Probe rounds run in
// preflight.DefaultProbeNamespace unless ProbeNamespace is changed.
func NewReconciler(mgr ctrl.Manager, namespace, probeImage string) (*Reconciler, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	metrics.Register()
	writes := metrics.NewWriteCounter(mgr.GetScheme())
	return &Reconciler{
		// Every write is counted and carries winready's field manager name.
		Client:         client.WithFieldOwner(&metrics.CountingClient{Client: mgr.GetClient(), Writes: writes}, FieldOwner),
		Writes:         writes,
		APIReader:      mgr.GetAPIReader(),
		Discovery:      disco,
		Recorder:       mgr.GetEventRecorder("winready"),
		Clock:          clock.RealClock{},
		Namespace:      namespace,
		ProbeNamespace: preflight.DefaultProbeNamespace,
		ProbeImage:     probeImage,
	}, nil
}
