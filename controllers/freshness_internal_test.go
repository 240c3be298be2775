package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/winready/winready/api/v1alpha1"
)

// countingReader counts the reads that go past the cache.
type countingReader struct {
	client.Reader
	gets int
}

// ahead is an API server a status write ahead of the cache, which holds
// cached, and what that write got back: the write sets the message.
func ahead(t *testing.T, scheme *runtime.Scheme, cached *v1alpha1.WindowsReadiness, message string) (client.Reader, *v1alpha1.WindowsReadiness) {
	t.Helper()
	store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached.DeepCopy()).WithStatusSubresource(cached).Build()
	wr := cached.DeepCopy()
	wr.Status.Message = message
	if err := store.Status().Update(context.Background(), wr); err != nil {
		t.Fatal(err)
	}
	return store, wr
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestAPassReadsPastTheCacheOnlyWhenTheCacheMayBeBehind plays a cache and
// the API server as two stores: a pass reads past the cache first, then from
// the cache while it shows the version this manager last saw or wrote, and
// past it again once the cache shows another (a spec edit, a stale cache).
func TestAPassReadsPastTheCacheOnlyWhenTheCacheMayBeBehind(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name, UID: "u1"}}
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(wr.DeepCopy()).WithStatusSubresource(wr).Build()
	api := &countingReader{Reader: cache}
	r := &Reconciler{Client: cache, APIReader: api}
	key := client.ObjectKey{Name: v1alpha1.Name}

	got, fresh, err := r.readWindowsReadiness(ctx, key)
	if err != nil || !fresh || api.gets != 1 {
		t.Fatalf("first pass: fresh %v, %d reads past the cache, %v; want one read past it", fresh, api.gets, err)
	}
	if _, fresh, _ = r.readWindowsReadiness(ctx, key); fresh || api.gets != 1 {
		t.Fatalf("steady pass: fresh %v, %d reads past the cache; want the cache alone", fresh, api.gets)
	}
	// A person edits the spec: the cache shows a version this manager has
	// not seen.
	got.Spec.Paused = true
	if err := cache.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, fresh, _ = r.readWindowsReadiness(ctx, key); !fresh || api.gets != 2 {
		t.Fatalf("after an edit: fresh %v, %d reads past the cache; want a second read past it", fresh, api.gets)
	}
	// The pass writes the status: the version it got back is the one the
	// next pass expects in the cache.
	written := &v1alpha1.WindowsReadiness{}
	if err := cache.Get(ctx, key, written); err != nil {
		t.Fatal(err)
	}
	written.Status.Message = "written"
	if err := cache.Status().Update(ctx, written); err != nil {
		t.Fatal(err)
	}
	r.seen.saw(written)
	if got, fresh, _ := r.readWindowsReadiness(ctx, key); fresh || api.gets != 2 || got.Status.Message != "written" {
		t.Fatalf("after its own write: fresh %v, %d reads past the cache, message %q", fresh, api.gets, got.Status.Message)
	}
	// The pass writes the status again, and a report wakes the next pass
	// before the write's event reaches the cache: the cache is behind, and
	// the pass takes the version its write got back, without a read.
	var newer *v1alpha1.WindowsReadiness
	api.Reader, newer = ahead(t, scheme, written, "written again")
	r.seen.saw(newer)
	if got, fresh, _ := r.readWindowsReadiness(ctx, key); fresh || api.gets != 2 || got.Status.Message != "written again" {
		t.Fatalf("with the cache behind its own write: fresh %v, %d reads past the cache, message %q; want its write, no read",
			fresh, api.gets, got.Status.Message)
	}
	// Versions that do not compare are read past the cache.
	r.seen.saw(&v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: "not-a-number"}})
	if _, fresh, _ = r.readWindowsReadiness(ctx, key); !fresh || api.gets != 3 {
		t.Fatalf("versions that do not compare: fresh %v, %d reads past the cache; want a read past it", fresh, api.gets)
	}
	// Another object of the same name (deleted and applied again).
	r.seen.saw(&v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{UID: "u0", ResourceVersion: written.ResourceVersion}})
	if _, fresh, _ = r.readWindowsReadiness(ctx, key); !fresh {
		t.Fatal("an object with another UID was taken from the cache")
	}
}
