package controllers

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/metrics"
)

// wakes remembers what woke the reconciler since its last pass, so that each
// pass is counted by its trigger (winready_passes_total): the kind of the
// first watched object whose event passed its predicates, else the
// RequeueAfter or the retry the previous pass asked for.
type wakes struct {
	mu sync.Mutex
	// first is the kind of the first event since the last pass began, ""
	// when none came.
	first string
	// asked is what the previous pass asked for: a RequeueAfter, a retry
	// after an error, or nothing (a manager's first pass).
	asked string
}

// handler enqueues WindowsReadiness default for an event of kind, and notes
// the kind. Predicates run before it, so only an event that passed them is
// noted.
func (w *wakes) handler(kind string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		name := v1alpha1.Name
		if _, ok := obj.(*v1alpha1.WindowsReadiness); ok {
			// Any other name is refused by the CRD; Reconcile ignores one
			// from before that rule.
			name = obj.GetName()
		}
		w.mu.Lock()
		if w.first == "" {
			w.first = kind
		}
		w.mu.Unlock()
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
	})
}

// passBegins counts the pass that is beginning by what woke it.
func (w *wakes) passBegins() {
	w.mu.Lock()
	trigger := w.first
	if trigger == "" {
		trigger = w.asked
	}
	if trigger == "" {
		trigger = metrics.TriggerStart
	}
	w.first, w.asked = "", ""
	w.mu.Unlock()
	metrics.RecordPass(trigger)
}

// passEnds remembers what the pass that ends asked for.
func (w *wakes) passEnds(result reconcile.Result, err error) {
	asked := ""
	switch {
	case err != nil:
		asked = metrics.TriggerRetry
	case result.RequeueAfter > 0:
		asked = metrics.TriggerRequeue
	}
	w.mu.Lock()
	w.asked = asked
	w.mu.Unlock()
}
