package passes_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
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
func (w *watches) selects(kind schema.GroupVersionKind, obj client.Object) (toolscache.TransformFunc, bool) {
	by := w.cached[kind]
	namespaces := w.cache.DefaultNamespaces
	if len(by.Namespaces) > 0 {
		namespaces = by.Namespaces
	}
	sel := overridden(cache.Config{LabelSelector: w.cache.DefaultLabelSelector, FieldSelector: w.cache.DefaultFieldSelector,
		Transform: w.cache.DefaultTransform}, cache.Config{LabelSelector: by.Label, FieldSelector: by.Field, Transform: by.Transform})
	if len(namespaces) > 0 && obj.GetNamespace() != "" {
		cfg, ok := namespaces[obj.GetNamespace()]
		if !ok {
			cfg, ok = namespaces[cache.AllNamespaces]
		}
		if !ok {
			return nil, false
		}
		sel = overridden(sel, cfg)
	}
	if sel.LabelSelector != nil && !sel.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
		return nil, false
	}
	if sel.FieldSelector != nil && !sel.FieldSelector.Matches(fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}) {
		return nil, false
	}
	return sel.Transform, true
}

// overridden is c with what by sets in place of its own.
func overridden(c, by cache.Config) cache.Config {
	if by.LabelSelector != nil {
		c.LabelSelector = by.LabelSelector
	}
	if by.FieldSelector != nil {
		c.FieldSelector = by.FieldSelector
	}
	if by.Transform != nil {
		c.Transform = by.Transform
	}
	return c
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

// The bed wakes winready through the manager's watches and predicates
// (controllers.Watches), so a predicate that drops an event a step waits for
// stalls a spec here as it would stall winready in a cluster.
var _ = Describe("Waking winready through the manager's watches", func() {
	It("lets a deleted WindowsReadiness go only through the watch that passes its deletion", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR()
		reconcileUntil(b, b.on.Condition(conditions.Ready), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonMigrated))
		b.rest(time.Hour)
		Expect(b.result.RequeueAfter).To(BeZero(), "winready asks for no other look at a Ready cluster")

		// A WindowsReadiness watch that misses the update marking it for
		// deletion: nothing wakes winready to lift its finalizer.
		b.watches = newWatches(withoutUpdates(controllers.Watches(), &v1alpha1.WindowsReadiness{}))
		wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
		Expect(b.k8s.Delete(ctx, wr)).To(Succeed())
		gone := func() bool { return apierrors.IsNotFound(b.k8s.Get(ctx, client.ObjectKeyFromObject(wr), wr)) }
		passes := b.passes
		failures := InterceptGomegaFailures(func() { reconcileUntil(b, gone, BeTrue(), "winready removes its finalizer") })
		Expect(failures).To(ConsistOf(ContainSubstring("nothing wakes winready any more")), "the deletion wakes no pass")
		Expect(b.passes).To(Equal(passes), "no pass ran")

		// The manager's own watch passes the same update, and winready lets
		// the WindowsReadiness go.
		b.watches = newWatches(controllers.Watches())
		reconcileUntil(b, gone, BeTrue(), "winready removes its finalizer")
	})

	It("wakes winready for an event of a watched kind the cache holds, and for no other write", func() {
		b := driveInline(calicosim.MainCluster())
		b.rest(time.Hour)
		Expect(b.woken()).To(BeFalse(), "at rest")
		create := func(obj client.Object) {
			GinkgoHelper()
			Expect(b.k8s.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(b.k8s.Delete(ctx, obj))).To(Succeed()) })
		}
		pod := func(name string, labels map[string]string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: calico.SystemNamespace, Name: name, Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		}

		create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "unwatched"}})
		Expect(b.woken()).To(BeFalse(), "a kind no watch covers")
		create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "not-the-services-endpoint"}})
		create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: "no-report"}})
		create(pod("not-calico-node", map[string]string{controllers.CalicoNodePodLabel: "other"}))
		Expect(b.woken()).To(BeFalse(), "objects of watched kinds the cache does not select")

		create(pod("calico-node-extra", map[string]string{controllers.CalicoNodePodLabel: controllers.CalicoNodePodLabelValue}))
		Expect(b.woken()).To(BeTrue(), "a calico-node pod the cache selects")
	})
})
