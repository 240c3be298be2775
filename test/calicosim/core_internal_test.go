package calicosim

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestTheIgnoreAnnotationComingOffWakesNoReconcile: the simulated operator,
// like the real one, wakes on a DaemonSet's generation and status, never on
// its metadata alone.
func TestTheIgnoreAnnotationComingOffWakesNoReconcile(t *testing.T) {
	ignored := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: nodeDaemonSet, Generation: 2,
		Annotations: map[string]string{ignoreAnnotation: "true"}}}
	released := ignored.DeepCopy()
	released.Annotations = nil
	if notMetadataOnly.Update(event.UpdateEvent{ObjectOld: ignored, ObjectNew: released}) {
		t.Error("the ignore annotation coming off woke a reconcile")
	}
	changed := released.DeepCopy()
	changed.Generation = 3
	if !notMetadataOnly.Update(event.UpdateEvent{ObjectOld: released, ObjectNew: changed}) {
		t.Error("a new generation woke no reconcile")
	}
	rolled := released.DeepCopy()
	rolled.Status.UpdatedNumberScheduled = 1
	if !notMetadataOnly.Update(event.UpdateEvent{ObjectOld: released, ObjectNew: rolled}) {
		t.Error("a status change woke no reconcile")
	}
}
