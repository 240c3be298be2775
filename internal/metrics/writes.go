// Package metrics exposes winready's Prometheus metrics on the manager's
// metrics endpoint.
package metrics

import (
	"context"
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiWrites counts the writes the API server accepted from the reconciler,
// by verb and kind; status writes of the WindowsReadiness are not included.
var apiWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "winready_api_writes_total",
	Help: "Writes to cluster objects accepted by the API server, by verb and kind.",
}, []string{"verb", "kind"})

var registerOnce sync.Once

// Register adds winready's metrics to controller-runtime's registry, which
// the manager serves.
func Register() {
	registerOnce.Do(func() {
		crmetrics.Registry.MustRegister(apiWrites, reads, phase, stepDuration, probeFailingPairs, blocked)
		crmetrics.Registry.MustRegister(rolloutCollectors...)
		crmetrics.Registry.MustRegister(buildInfo, lastProgress, progressDeadline, windowsNodes, calicoNodeIgnored, passes)
	})
}

// WriteCounter counts the writes made through a CountingClient.
type WriteCounter struct {
	scheme *runtime.Scheme
	mu     sync.Mutex
	counts map[string]int
}

// NewWriteCounter returns an empty counter that names kinds with scheme.
func NewWriteCounter(scheme *runtime.Scheme) *WriteCounter {
	return &WriteCounter{scheme: scheme, counts: map[string]int{}}
}

func (w *WriteCounter) add(obj client.Object, verb string) {
	kind := kindName(w.scheme, obj)
	apiWrites.WithLabelValues(verb, kind).Inc()
	key := kind + " " + verb
	if ns := obj.GetNamespace(); ns != "" {
		key = kind + " " + ns + " " + verb
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[key]++
}

// Snapshot returns the counts so far, keyed "<Kind> <verb>", or
// "<Kind> <namespace> <verb>" for namespaced objects.
func (w *WriteCounter) Snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.counts)
}

// kindName is obj's kind: its type meta's, else the one scheme names.
func kindName(scheme *runtime.Scheme, obj runtime.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" && scheme != nil {
		if gvks, _, err := scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			kind = gvks[0].Kind
		}
	}
	return kind
}

// Total is the number of writes so far.
func (w *WriteCounter) Total() int {
	total := 0
	for _, v := range w.Snapshot() {
		total += v
	}
	return total
}

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
