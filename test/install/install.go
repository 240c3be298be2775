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
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

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
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", dir, err)
		}
		objs = append(objs, u)
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
