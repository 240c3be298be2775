package controllers

import (
	"context"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/windows"
)

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
	if p, ok := obj.(*corev1.Pod); ok {
		return calicoNodePodOnly(p), nil
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
