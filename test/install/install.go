// Package install builds winready's kustomizations as `kubectl apply -k`
// does and creates their objects, so that tests run against the manifests
// users install.
package install

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// ReadManifest reads a multi-document YAML manifest, such as a release's
// install.yaml.
func ReadManifest(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decode(data, path)
}

// Build is the kustomization in dir as kustomize builds it.
func Build(dir string) ([]*unstructured.Unstructured, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return nil, err
	}
	return decode(out, dir)
}

func decode(out []byte, from string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", from, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Create creates each object that keep accepts, Namespaces first, leaving
// existing ones as they are.
func Create(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, keep func(*unstructured.Unstructured) bool) error {
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return cmp.Compare(rank(a), rank(b))
	})
	for _, obj := range objs {
		if keep != nil && !keep(obj) {
			continue
		}
		if err := c.Create(ctx, obj.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

func rank(u *unstructured.Unstructured) int {
	if u.GetKind() == "Namespace" {
		return 0
	}
	return 1
}

// Named keeps the objects of the given names.
func Named(names ...string) func(*unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		for _, n := range names {
			if u.GetName() == n {
				return true
			}
		}
		return false
	}
}

// Apply applies every object as `kubectl apply --server-side` does, in the
// order a first install needs: CustomResourceDefinitions and Namespaces
// first, waiting for each CRD to be established, then the rest. Applying over
// an earlier install (an upgrade) updates the objects in place.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return cmp.Compare(applyRank(a), applyRank(b))
	})
	for _, obj := range objs {
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
			client.FieldOwner("kubectl"), client.ForceOwnership)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			if err := waitEstablished(ctx, c, obj.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

// CreateNamespacesOf creates the namespace of every namespaced object that
// does not exist yet: winready's Roles live in Calico's namespaces
// (calico-system, tigera-operator), which a Calico install made before.
func CreateNamespacesOf(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetNamespace() == "" {
			continue
		}
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(o.GetNamespace())
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", o.GetNamespace(), err)
		}
	}
	return nil
}

func applyRank(u *unstructured.Unstructured) int {
	switch u.GetKind() {
	case "CustomResourceDefinition":
		return 0
	case "Namespace":
		return 1
	}
	return 2
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// ManagerDeployment is the manager's Deployment among objs.
func ManagerDeployment(objs []*unstructured.Unstructured) (*appsv1.Deployment, error) {
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" && obj.GetName() == "winready-manager" {
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
				return nil, err
			}
			return d, nil
		}
	}
	return nil, errors.New("no Deployment winready-manager")
}
