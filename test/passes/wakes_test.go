package passes_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/controllers"
)

// watches wake a pass of the inline bed as the manager's watches wake one:
// each kind of controllers.Watches through its predicate, over what
// controllers.CacheOptions caches of it and as the cache holds it.
type watches struct {
	byKind map[schema.GroupVersionKind]controllers.Watch
	cache  cache.Options
	// cached is cache.ByObject by kind.
	cached map[schema.GroupVersionKind]cache.ByObject
}

// newWatches are the watches ws over the manager's cache.
func newWatches(ws []controllers.Watch) *watches {
	w := &watches{byKind: map[schema.GroupVersionKind]controllers.Watch{}, cache: controllers.CacheOptions(probeNamespace),
		cached: map[schema.GroupVersionKind]cache.ByObject{}}
	for _, watch := range ws {
		w.byKind[kindOf(watch.Object)] = watch
	}
	for obj, by := range w.cache.ByObject {
		w.cached[kindOf(obj)] = by
	}
	return w
}

// kindOf is the kind of obj in the suite's scheme.
func kindOf(obj client.Object) schema.GroupVersionKind {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		panic(fmt.Sprintf("%T is not in the scheme: %v", obj, err))
	}
	return gvk
}

// wakes says whether c wakes a pass: the event an informer of its kind
// delivers for it passes the kind's predicate. An object that enters the
// cache's selection is created for the informer, one that leaves it
// deleted; one outside it, or of a kind no watch covers, wakes nothing.
func (w *watches) wakes(c change) bool {
	watch, ok := w.byKind[c.Kind]
	if !ok {
		return false
	}
	was, is := w.seen(watch, c.Kind, c.Old), w.seen(watch, c.Kind, c.New)
	switch {
	case was == nil && is == nil:
		return false
	case was == nil:
		return watch.Predicate.Create(event.CreateEvent{Object: is})
	case is == nil:
		return watch.Predicate.Delete(event.DeleteEvent{Object: was})
	default:
		return watch.Predicate.Update(event.UpdateEvent{ObjectOld: was, ObjectNew: is})
	}
}

// seen is obj as the manager's cache holds it, its metadata alone for a
// metadata watch; nil when obj is nil or the cache does not select it.
func (w *watches) seen(watch controllers.Watch, kind schema.GroupVersionKind, obj client.Object) client.Object {
	if obj == nil {
		return nil
	}
	transform, selected := w.selects(kind, obj)
	if !selected {
		return nil
	}
	obj = obj.DeepCopyObject().(client.Object)
	if watch.Metadata {
		m := meta.AsPartialObjectMetadata(obj)
		m.SetGroupVersionKind(kind)
		obj = m
	}
	if transform == nil {
		return obj
	}
	out, err := transform(obj)
	if err != nil {
		panic(fmt.Sprintf("the cache's transform of %s %s: %v", kind.Kind, client.ObjectKeyFromObject(obj), err))
	}
	return out.(client.Object)
}

// selects says whether the cache holds obj, of kind, and with which
// transform: its namespaces, label and field selectors (cache.Options'
// defaults, overridden by the kind's ByObject and its namespace's Config).
func (w *watches) selects(kind schema.GroupVersionKind, obj client.Object) (func(any) (any, error), bool) {
	by := w.cached[kind]
	namespaces, label, field, transform := w.cache.DefaultNamespaces, w.cache.DefaultLabelSelector, w.cache.DefaultFieldSelector, w.cache.DefaultTransform
	if len(by.Namespaces) > 0 {
		namespaces = by.Namespaces
	}
	if by.Label != nil {
		label = by.Label
	}
	if by.Field != nil {
		field = by.Field
	}
	if by.Transform != nil {
		transform = by.Transform
	}
	if len(namespaces) > 0 && obj.GetNamespace() != "" {
		cfg, ok := namespaces[obj.GetNamespace()]
		if !ok {
			cfg, ok = namespaces[cache.AllNamespaces]
		}
		if !ok {
			return nil, false
		}
		if cfg.LabelSelector != nil {
			label = cfg.LabelSelector
		}
		if cfg.FieldSelector != nil {
			field = cfg.FieldSelector
		}
		if cfg.Transform != nil {
			transform = cfg.Transform
		}
	}
	if label != nil && !label.Matches(labels.Set(obj.GetLabels())) {
		return nil, false
	}
	if field != nil && !field.Matches(fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}) {
		return nil, false
	}
	return transform, true
}

// withoutUpdates are ws with the predicate of obj's kind dropping every
// update: a watch that would miss what a step waits for.
func withoutUpdates(ws []controllers.Watch, obj client.Object) []controllers.Watch {
	out := append([]controllers.Watch(nil), ws...)
	for i, w := range out {
		if kindOf(w.Object) == kindOf(obj) {
			p := w.Predicate
			out[i].Predicate = predicate.Funcs{CreateFunc: p.Create, DeleteFunc: p.Delete, GenericFunc: p.Generic,
				UpdateFunc: func(event.UpdateEvent) bool { return false }}
		}
	}
	return out
}
