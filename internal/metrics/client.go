package metrics

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountingClient counts every write the API server accepted, and every read
// when Reads is set (reads.go).
type CountingClient struct {
	client.Client
	Writes *WriteCounter
	Reads  *ReadCounter
}

func (c *CountingClient) count(obj client.Object, verb string, err error) error {
	if err == nil {
		c.Writes.add(obj, verb)
	}
	return err
}

// Create creates obj and counts the write once it succeeded.
func (c *CountingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.count(obj, "create", c.Client.Create(ctx, obj, opts...))
}

// Patch patches obj and counts the write once it succeeded.
func (c *CountingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return c.count(obj, "patch", c.Client.Patch(ctx, obj, p, opts...))
}

// Update updates obj and counts the write once it succeeded.
func (c *CountingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.count(obj, "update", c.Client.Update(ctx, obj, opts...))
}

// Delete deletes obj and counts the write once it succeeded.
func (c *CountingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.count(obj, "delete", c.Client.Delete(ctx, obj, opts...))
}

// DeleteAllOf deletes the objects of obj's kind and counts the write, in
// the namespace the options name, once it succeeded.
func (c *CountingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	all := &client.DeleteAllOfOptions{}
	all.ApplyOptions(opts)
	if all.Namespace != "" {
		obj = obj.DeepCopyObject().(client.Object)
		obj.SetNamespace(all.Namespace)
	}
	return c.count(obj, "deletecollection", c.Client.DeleteAllOf(ctx, obj, opts...))
}

// Get reads obj from the manager's cache (unstructured objects from the API
// server) and counts the read when the client counts reads.
func (c *CountingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.Reads.add(ReadFromCache, "get", obj)
	return c.Client.Get(ctx, key, obj, opts...)
}

// List reads list from the manager's cache (unstructured lists from the API
// server) and counts the read when the client counts reads.
func (c *CountingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.Reads.add(ReadFromCache, "list", list)
	return c.Client.List(ctx, list, opts...)
}
