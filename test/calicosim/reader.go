package calicosim

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cachedReader reads through a manager's cache, as the Tigera operator and the Kubernetes controllers do, and answers
// as the API server does where the cache would not: a missing object's error names its resource (`configmaps "x" not
// found`, which the operator's status messages quote, where the cache names the kind), and a list in pages (shared
// code that pages through the API server) comes whole, in one page.
type cachedReader struct{ client.Client }

func newCachedReader(mgr ctrl.Manager) client.Reader { return cachedReader{mgr.GetClient()} }

func (r cachedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Client.Get(ctx, key, obj, opts...)
	if !apierrors.IsNotFound(err) {
		return err
	}
	gvk, gerr := r.GroupVersionKindFor(obj)
	if gerr != nil {
		return err
	}
	mapping, merr := r.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if merr != nil {
		return err
	}
	return apierrors.NewNotFound(mapping.Resource.GroupResource(), key.Name)
}

func (r cachedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	o.Limit, o.Continue = 0, ""
	if err := r.Client.List(ctx, list, o); err != nil {
		return err
	}
	list.SetContinue("")
	return nil
}
