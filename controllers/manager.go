package controllers

import (
	"context"
	"fmt"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"github.com/winready/winready/internal/round"
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
// name-scoped RBAC requires), the rounds' reports in probeNamespace (not
// their plans), Nodes as metadata, IPAM blocks as their affinity alone, and
// no managedFields anywhere. The record of the originals in the
// operator's namespace is read past the cache.
func CacheOptions(probeNamespace string) cache.Options {
	reports, err := labels.NewRequirement(round.ReportLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	return cache.Options{
		DefaultTransform: stripCached,
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

// stripCached keeps in the cache what the reconciler reads: no
// managedFields anywhere, and of an IPAM block (read by the Windows join
// watch) its affinity alone, its allocations and attributes being most of
// it. A transform by type (ByObject) would need the blocks' API served when
// the manager starts.
func stripCached(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	return blockAffinityOnly(obj)
}

// blockHostIndex indexes the cached IPAM blocks by the node they are affine
// to: the join watch reads the blocks of the nodes it waits for, not every
// block of the cluster on every pass.
const blockHostIndex = "spec.affinityHost"

// crdIPAMBlock is an IPAM block as crd.projectcalico.org/v1 serves it, where
// projectcalico.org/v3 serves none.
func crdIPAMBlock() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "crd.projectcalico.org", Version: "v1", Kind: "IPAMBlock"})
	return u
}

// blockAffinityOnly keeps of an IPAM block its name, version, deletion and
// spec.cidr and spec.affinity.
func blockAffinityOnly(obj any) (any, error) {
	switch b := obj.(type) {
	case *calicov3.IPAMBlock:
		return &calicov3.IPAMBlock{TypeMeta: b.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion,
			DeletionTimestamp: b.DeletionTimestamp}, Spec: calicov3.IPAMBlockSpec{CIDR: b.Spec.CIDR, Affinity: b.Spec.Affinity}}, nil
	case *unstructured.Unstructured:
		if b.GroupVersionKind() != crdIPAMBlock().GroupVersionKind() {
			return obj, nil
		}
		kept := &unstructured.Unstructured{Object: map[string]any{"apiVersion": b.GetAPIVersion(), "kind": b.GetKind()}}
		kept.SetName(b.GetName())
		kept.SetUID(b.GetUID())
		kept.SetResourceVersion(b.GetResourceVersion())
		kept.SetDeletionTimestamp(b.GetDeletionTimestamp())
		for _, f := range []string{"cidr", "affinity"} {
			if v, ok, _ := unstructured.NestedString(b.Object, "spec", f); ok {
				_ = unstructured.SetNestedField(kept.Object, v, "spec", f)
			}
		}
		return kept, nil
	}
	return obj, nil
}

// indexBlocks indexes the IPAM blocks of the API that serves them by node
// (blockHostIndex). When neither serves them yet, nothing is indexed and the
// join watch reads blocks from the API server.
func indexBlocks(ctx context.Context, indexer client.FieldIndexer, d preflight.Discovery) error {
	api, err := preflight.DiscoverCalicoAPI(d)
	if err != nil {
		return err
	}
	switch {
	case api.V3["ipamblocks"]:
		return indexer.IndexField(ctx, &calicov3.IPAMBlock{}, blockHostIndex, blockHost)
	case api.V1["ipamblocks"]:
		return indexer.IndexField(ctx, crdIPAMBlock(), blockHostIndex, blockHost)
	}
	return nil
}

// blockHost is the node an IPAM block is affine to, as the index holds it.
func blockHost(obj client.Object) []string {
	var affinity *string
	switch b := obj.(type) {
	case *calicov3.IPAMBlock:
		affinity = b.Spec.Affinity
	case *unstructured.Unstructured:
		if a, ok, _ := unstructured.NestedString(b.Object, "spec", "affinity"); ok {
			affinity = &a
		}
	}
	if host := windows.AffineHost(affinity); host != "" {
		return []string{host}
	}
	return nil
}

// NewReconciler builds the reconciler for a manager made with NewScheme and
// CacheOptions; call SetupWithManager to start it with the manager. Its
// client counts the writes it makes (Writes). Rounds run in
// round.DefaultNamespace unless ProbeNamespace is changed. It indexes the
// IPAM blocks in the manager's cache by node.
func NewReconciler(mgr ctrl.Manager, namespace, probeImage string) (*Reconciler, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	if err := indexBlocks(context.Background(), mgr.GetFieldIndexer(), disco); err != nil {
		return nil, fmt.Errorf("indexing IPAM blocks by node: %w", err)
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
		ProbeNamespace: round.DefaultNamespace,
		ProbeImage:     probeImage,
	}, nil
}
