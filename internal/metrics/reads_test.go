package metrics

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestReadsAreCountedByWhereTheyWereAnswered: the client's reads count as
// the cache's, the API reader's and any unstructured read as the API
// server's, by kind and verb, whatever the object's TypeMeta says.
func TestReadsAreCountedByWhereTheyWereAnswered(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "linux-0"}}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(node).Build()
	reads := NewReadCounter(scheme.Scheme)
	cached := &CountingClient{Client: c, Writes: NewWriteCounter(scheme.Scheme), Reads: reads}
	api := &CountingReader{Reader: c, Reads: reads, Source: ReadFromAPIServer}

	if err := cached.Get(ctx, client.ObjectKey{Name: "linux-0"}, &corev1.Node{}); err != nil {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := cached.List(ctx, meta); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := cached.List(ctx, u); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := api.List(ctx, &corev1.NodeList{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"cache Node get": 1, "cache Node list": 1, "apiserver Node list": 3}
	if got := reads.Snapshot(); !maps.Equal(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
	if reads.Total(ReadFromCache) != 2 || reads.Total(ReadFromAPIServer) != 3 {
		t.Errorf("totals: cache %d, apiserver %d; want 2 and 3", reads.Total(ReadFromCache), reads.Total(ReadFromAPIServer))
	}

	// A client that counts no reads still reads.
	uncounted := &CountingClient{Client: c, Writes: NewWriteCounter(scheme.Scheme)}
	if err := uncounted.Get(ctx, client.ObjectKey{Name: "linux-0"}, &corev1.Node{}); err != nil {
		t.Fatal(err)
	}
}
