package kit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/test/calicosim"
)

// seedOwner is the field manager of the seed's objects, as a GitOps tool
// would have its own.
const seedOwner = "winready-kit-seed"

// seed is Options.Seed decoded: what the simulated operator's Seed takes, and
// the objects applied after it.
type seed struct {
	installation     *operatorv1.InstallationSpec
	servicesEndpoint map[string]string
	others           []*unstructured.Unstructured
}

func parseSeed(data []byte) (*seed, error) {
	objs, err := decodeAll(data)
	if err != nil {
		return nil, fmt.Errorf("reading the seed: %w", err)
	}
	s := &seed{}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		switch {
		case gvk.Group == operatorv1.GroupVersion.Group && gvk.Kind == "Installation":
			if s.installation != nil || u.GetName() != "default" {
				return nil, fmt.Errorf("the seed's Installation %q: the Tigera operator reads one Installation, named default", u.GetName())
			}
			inst := &operatorv1.Installation{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, inst); err != nil {
				return nil, fmt.Errorf("reading the seed's Installation: %w", err)
			}
			s.installation = &inst.Spec
		case gvk.Group == "" && gvk.Kind == "ConfigMap" && u.GetNamespace() == "tigera-operator" &&
			u.GetName() == "kubernetes-services-endpoint":
			// The operator renders calico-node with it: it is there before.
			data, _, err := unstructured.NestedStringMap(u.Object, "data")
			if err != nil {
				return nil, fmt.Errorf("reading the seed's ConfigMap %s: %w", u.GetName(), err)
			}
			s.servicesEndpoint = data
		default:
			s.others = append(s.others, u)
		}
	}
	if s.installation == nil {
		return nil, errors.New("the seed holds no Installation named default: winready migrates a Calico cluster the Tigera operator installed")
	}
	return s, nil
}

// decodeAll reads every object of a YAML or JSON stream, items of a List
// included, without what the API server sets (status, resourceVersion, uid).
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "" || u.GetName() == "" && !u.IsList() {
			return nil, fmt.Errorf("an object without kind or metadata.name: %.80q", doc)
		}
		if !u.IsList() {
			objs = append(objs, stripped(u))
			continue
		}
		err = u.EachListItem(func(o runtime.Object) error {
			objs = append(objs, stripped(o.(*unstructured.Unstructured)))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
}

// stripped drops what only the API server that held the object may set.
func stripped(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields",
		"selfLink", "ownerReferences", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "annotations", corev1.LastAppliedConfigAnnotation)
	unstructured.RemoveNestedField(u.Object, "status")
	return u
}

// seed creates the cluster as the Tigera operator would have left it with the
// seed's Installation, then the seed's other objects.
func (c *Cluster) seed(ctx context.Context, s *seed, nodes []Node) error {
	cl := calicosim.Cluster{Nodes: nodes, Installation: s.installation, ServicesEndpoint: s.servicesEndpoint}
	if len(cl.Nodes) == 0 {
		cl.Nodes = calicosim.MainCluster().Nodes
	}
	if err := calicosim.Seed(ctx, c.client, cl); err != nil {
		return fmt.Errorf("seeding the cluster: %w", err)
	}
	for _, u := range s.others {
		if err := c.applySeed(ctx, u); err != nil {
			return fmt.Errorf("applying the seed's %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	return nil
}

func (c *Cluster) applySeed(ctx context.Context, u *unstructured.Unstructured) error {
	if u.GroupVersionKind().Group == "projectcalico.org" && u.GetKind() == "IPPool" {
		// A pool the Installation describes is the operator's, made from it.
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(u.GroupVersionKind())
		err := c.client.Get(ctx, client.ObjectKeyFromObject(u), existing)
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	namespaced, err := c.client.IsObjectNamespaced(u)
	if err != nil {
		return err
	}
	if namespaced {
		if u.GetNamespace() == "" {
			u.SetNamespace(metav1.NamespaceDefault)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetNamespace()}}
		if err := c.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(seedOwner), client.ForceOwnership)
}
