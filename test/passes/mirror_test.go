package passes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// mirrorClient writes to the API server and reads from memory what the API
// server answered: the inline specs keep the API server's validation,
// defaulting and admission on every write, and read without a round trip,
// with no cache to lag behind. It holds every object of the kinds it primed
// (primeMirror); reads of other kinds go to the API server. Every client of
// the inline world (winready's, the simulator's, the spec's) is this one, so
// the memory never misses a write; a write the API server makes on its own
// is not seen.
//
// It records every write that changed an object (a new resource version),
// with the object before and after as the API server answered: what a watch
// of its kind would see (the bed wakes winready through them, wakes_test.go).
type mirrorClient struct {
	client.WithWatch // the API server

	mem     client.WithWatch
	tracker clienttesting.ObjectTracker

	mu     sync.Mutex
	primed map[schema.GroupVersionKind]bool
	// changes are the writes that changed an object, in their order.
	changes []change
}

// change is a write that changed an object: the object before and after it
// as the API server answered, Old nil for a create and New nil for a delete.
type change struct {
	Kind     schema.GroupVersionKind
	Old, New client.Object
}

// apiServerWrites are the kinds the API server writes on its own (quota
// admission counts into a ResourceQuota's status), or that its own loops
// keep writing: the mirror leaves them to the API server.
var apiServerWrites = map[string]bool{"ResourceQuota": true, "Lease": true, "Event": true, "ComponentStatus": true}

// newMirror returns a mirror of api. It reads each kind from the API server
// the first time it is read, and from memory after that.
func newMirror(api client.WithWatch) *mirrorClient {
	sch := api.Scheme()
	tracker := clienttesting.NewObjectTracker(sch, serializer.NewCodecFactory(sch).UniversalDecoder())
	return &mirrorClient{WithWatch: api, tracker: tracker, primed: map[schema.GroupVersionKind]bool{},
		mem: fake.NewClientBuilder().WithScheme(sch).WithRESTMapper(api.RESTMapper()).WithObjectTracker(tracker).WithReturnManagedFields().Build()}
}

// load lists a kind from the API server into memory; a kind it does not
// serve stays unprimed.
func (m *mirrorClient) load(ctx context.Context, listGVK, item schema.GroupVersionKind) error {
	obj, err := m.Scheme().New(listGVK)
	if err != nil {
		return err
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil
	}
	if err := m.WithWatch.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsForbidden(err) ||
			apierrors.IsServiceUnavailable(err) {
			return nil
		}
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, it := range items {
		o := it.(client.Object)
		o.GetObjectKind().SetGroupVersionKind(item)
		// Read, not written: no watch would see a change.
		if _, _, err := m.store(o); err != nil {
			return err
		}
	}
	m.mu.Lock()
	m.primed[item] = true
	m.mu.Unlock()
	return nil
}

// mirrored says whether memory answers reads of obj's kind, reading the
// kind from the API server the first time.
func (m *mirrorClient) mirrored(ctx context.Context, obj runtime.Object) (bool, error) {
	gvk, err := apiutil.GVKForObject(obj, m.Scheme())
	if err != nil {
		return false, nil
	}
	item := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
	if _, err := m.Scheme().New(item); err != nil || apiServerWrites[item.Kind] || item.Group == metav1.GroupName {
		return false, nil
	}
	m.mu.Lock()
	primed := m.primed[item]
	m.mu.Unlock()
	if primed {
		return true, nil
	}
	if err := m.load(ctx, item.GroupVersion().WithKind(item.Kind+"List"), item); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.primed[item], nil
}

// resource names obj's kind and resource.
func (m *mirrorClient) resource(obj runtime.Object) (schema.GroupVersionKind, schema.GroupVersionResource, error) {
	gvk, err := apiutil.GVKForObject(obj, m.Scheme())
	if err != nil {
		return gvk, schema.GroupVersionResource{}, err
	}
	mapping, err := m.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return gvk, schema.GroupVersionResource{}, err
	}
	return gvk, mapping.Resource, nil
}

// put stores the API server's answer, and records it when it is a change.
func (m *mirrorClient) put(obj client.Object) error {
	old, changed, err := m.store(obj)
	if err == nil && changed {
		m.record(old, obj)
	}
	return err
}

// store keeps obj in memory; it returns what memory held before (nil when
// nothing) and whether obj changed it.
func (m *mirrorClient) store(obj client.Object) (client.Object, bool, error) {
	gvk, gvr, err := m.resource(obj)
	if err != nil {
		return nil, false, err
	}
	stored := obj.DeepCopyObject().(client.Object)
	stored.GetObjectKind().SetGroupVersionKind(gvk)
	held, err := m.tracker.Get(gvr, obj.GetNamespace(), obj.GetName())
	switch {
	case apierrors.IsNotFound(err):
		return nil, true, m.tracker.Create(gvr, stored, obj.GetNamespace())
	case err != nil:
		return nil, false, err
	}
	prev, ok := held.(client.Object)
	if !ok {
		return nil, false, fmt.Errorf("%s %s/%s in memory is no object", gvk.Kind, obj.GetNamespace(), obj.GetName())
	}
	return prev, prev.GetResourceVersion() != obj.GetResourceVersion(), m.tracker.Update(gvr, stored, obj.GetNamespace())
}

// record notes a change of an object from was to is (either nil).
func (m *mirrorClient) record(was, is client.Object) {
	c := change{Old: m.copyOf(was), New: m.copyOf(is)}
	for _, o := range []client.Object{c.Old, c.New} {
		if o != nil {
			c.Kind = o.GetObjectKind().GroupVersionKind()
		}
	}
	m.mu.Lock()
	m.changes = append(m.changes, c)
	m.mu.Unlock()
}

// copyOf is a copy of obj that names its kind; nil for nil.
func (m *mirrorClient) copyOf(obj client.Object) client.Object {
	if obj == nil {
		return nil
	}
	c := obj.DeepCopyObject().(client.Object)
	if gvk, _, err := m.resource(obj); err == nil {
		c.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return c
}

// Changes are the changes recorded from the from-th on, and how many were
// recorded in all.
func (m *mirrorClient) Changes(from int) ([]change, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]change(nil), m.changes[min(from, len(m.changes)):]...), len(m.changes)
}

// forget drops an object the API server no longer has, and records its
// deletion with what memory held of it (obj when nothing).
func (m *mirrorClient) forget(obj client.Object) error {
	_, gvr, err := m.resource(obj)
	if err != nil {
		return err
	}
	was := obj
	if held, err := m.tracker.Get(gvr, obj.GetNamespace(), obj.GetName()); err == nil {
		if o, ok := held.(client.Object); ok {
			was = o
		}
	}
	if err := m.tracker.Delete(gvr, obj.GetNamespace(), obj.GetName()); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	m.record(was, nil)
	return nil
}

// refresh reads obj back from the API server after a write that may have
// removed it (a delete, whose answer a finalizer may delay).
func (m *mirrorClient) refresh(ctx context.Context, obj client.Object) error {
	fresh := obj.DeepCopyObject().(client.Object)
	err := m.WithWatch.Get(ctx, client.ObjectKeyFromObject(obj), fresh)
	switch {
	case apierrors.IsNotFound(err):
		return m.forget(obj)
	case err != nil:
		return err
	}
	return m.put(fresh)
}

func (m *mirrorClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if ok, err := m.mirrored(ctx, obj); err != nil || !ok {
		return errors.Join(err, m.WithWatch.Get(ctx, key, obj, opts...))
	}
	return m.mem.Get(ctx, key, obj, opts...)
}

func (m *mirrorClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if ok, err := m.mirrored(ctx, list); err != nil || !ok {
		return errors.Join(err, m.WithWatch.List(ctx, list, opts...))
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector != nil && !o.FieldSelector.Empty() {
		// Memory has no field index: the API server answers.
		return m.WithWatch.List(ctx, list, opts...)
	}
	return m.mem.List(ctx, list, opts...)
}

func (m *mirrorClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := m.WithWatch.Create(ctx, obj, opts...); err != nil {
		return err
	}
	return m.put(obj)
}

func (m *mirrorClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := m.WithWatch.Update(ctx, obj, opts...); err != nil {
		return err
	}
	return m.written(ctx, obj)
}

func (m *mirrorClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := m.WithWatch.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	return m.written(ctx, obj)
}

// written keeps the server's answer to an update; an object being deleted
// whose last finalizer the write removed is gone, and is read back.
func (m *mirrorClient) written(ctx context.Context, obj client.Object) error {
	if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
		return m.refresh(ctx, obj)
	}
	return m.put(obj)
}

func (m *mirrorClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := m.WithWatch.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	return m.refresh(ctx, obj)
}

func (m *mirrorClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := m.WithWatch.DeleteAllOf(ctx, obj, opts...); err != nil {
		return err
	}
	gvk, _, err := m.resource(obj)
	if err != nil {
		return err
	}
	// Read back what memory holds in the delete's namespace and labels: the
	// deleted are gone, those a finalizer keeps are marked. Memory has no
	// field index: a field selector reads back every object of those.
	sel := (&client.DeleteAllOfOptions{}).ApplyOptions(opts).ListOptions
	sel.FieldSelector = nil
	existing, err := m.Scheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return err
	}
	if err := m.mem.List(ctx, existing.(client.ObjectList), &sel); err != nil {
		return err
	}
	items, err := meta.ExtractList(existing)
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := m.refresh(ctx, it.(client.Object)); err != nil {
			return err
		}
	}
	return nil
}

func (m *mirrorClient) Status() client.SubResourceWriter { return m.SubResource("status") }

func (m *mirrorClient) SubResource(sub string) client.SubResourceClient {
	return &mirrorSubResource{SubResourceClient: m.WithWatch.SubResource(sub), m: m}
}

type mirrorSubResource struct {
	client.SubResourceClient
	m *mirrorClient
}

func (s *mirrorSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.SubResourceClient.Update(ctx, obj, opts...); err != nil {
		return err
	}
	return s.m.put(obj)
}

func (s *mirrorSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.SubResourceClient.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	return s.m.put(obj)
}
