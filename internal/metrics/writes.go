// Package metrics exposes winready's Prometheus metrics on the manager's
// metrics endpoint.
package metrics

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// apiWrites counts the writes the API server accepted from the reconciler,
// by verb and kind; status writes of the WindowsReadiness are not included.
var apiWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "winready_api_writes_total",
	Help: "Writes to cluster objects accepted by the API server, by verb and kind.",
}, []string{"verb", "kind"})

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
