package metrics

import (
	"context"
	"maps"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where a read was answered from.
const (
	// ReadFromCache is a read through the manager's client, which its
	// informers answer.
	ReadFromCache = "cache"
	// ReadFromAPIServer is a read past the cache: through the API reader,
	// or of an unstructured object, which the manager's client does not
	// cache.
	ReadFromAPIServer = "apiserver"
)

// reads counts the gets and lists of the reconciler by where they were
// answered, verb and kind; a list counts once, however many pages the
// caller asks for in separate lists.
var reads = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "winready_reads_total",
	Help: "Gets and lists of the reconciler, by where they were answered (cache, or apiserver past the cache), verb and kind.",
}, []string{"source", "verb", "kind"})

// ReadCounter counts the reads made through a CountingClient or a
// CountingReader.
type ReadCounter struct {
	scheme *runtime.Scheme
	mu     sync.Mutex
	counts map[string]int
}

// NewReadCounter returns an empty counter that names kinds with scheme.
func NewReadCounter(scheme *runtime.Scheme) *ReadCounter {
	return &ReadCounter{scheme: scheme, counts: map[string]int{}}
}

func (r *ReadCounter) add(source, verb string, obj runtime.Object) {
	if r == nil {
		return
	}
	if _, ok := obj.(runtime.Unstructured); ok {
		// The manager's client reads unstructured objects, and lists,
		// from the API server.
		source = ReadFromAPIServer
	}
	kind := strings.TrimSuffix(kindName(r.scheme, obj), "List")
	reads.WithLabelValues(source, verb, kind).Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[source+" "+kind+" "+verb]++
}

// Snapshot returns the counts so far, keyed "<source> <Kind> <verb>" (source
// ReadFromCache or ReadFromAPIServer, verb get or list).
func (r *ReadCounter) Snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}

// Total is the number of reads so far answered from source.
func (r *ReadCounter) Total(source string) int {
	total := 0
	for k, v := range r.Snapshot() {
		if strings.HasPrefix(k, source+" ") {
			total += v
		}
	}
	return total
}

// CountingReader counts the reads made through Reader as answered from
// Source.
type CountingReader struct {
	client.Reader
	Reads  *ReadCounter
	Source string
}

// Get reads obj and counts the read.
func (c *CountingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.Reads.add(c.Source, "get", obj)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// List reads list and counts the read.
func (c *CountingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.Reads.add(c.Source, "list", list)
	return c.Reader.List(ctx, list, opts...)
}
