package controllers

import (
	"testing"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

func passes(p predicate.Predicate, was, is client.Object) bool {
	return p.Update(event.UpdateEvent{ObjectOld: was, ObjectNew: is})
}

// calicoNodeAt is calico-node at generation 2 on 1,000 nodes, updated of them
// on the new template and all but unavailable available.
func calicoNodeAt(updated, unavailable int32) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "calico-system", Name: "calico-node", Generation: 2},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 1000, UpdatedNumberScheduled: updated,
			NumberAvailable: 1000 - unavailable, NumberUnavailable: unavailable},
	}
}

// TestARolloutWakesAPassAtEachMarkNotAtEachNode walks a rollout of 1,000
// nodes one node at a time: a pass is woken at each 2% mark and at the end,
// never more than progressMarks times plus its ends.
func TestARolloutWakesAPassAtEachMarkNotAtEachNode(t *testing.T) {
	p := daemonSetChanged()
	woken := 0
	prev := calicoNodeAt(0, 0)
	for updated := int32(1); updated <= 1000; updated++ {
		unavailable := int32(1)
		if updated == 1000 {
			unavailable = 0
		}
		next := calicoNodeAt(updated, unavailable)
		if passes(p, prev, next) {
			woken++
		}
		prev = next
	}
	if woken < progressMarks || woken > progressMarks+3 {
		t.Errorf("a rollout of 1,000 nodes woke %d passes, want about %d", woken, progressMarks)
	}
	done := calicoNodeAt(1000, 0)
	if passes(p, done, done.DeepCopy()) {
		t.Error("a resync of a finished rollout woke a pass")
	}
	changed := done.DeepCopy()
	changed.Generation = 3
	if !passes(p, done, changed) {
		t.Error("a new template woke no pass")
	}
	ignored := done.DeepCopy()
	ignored.Annotations = map[string]string{"unsupported.operator.tigera.io/ignore": "true"}
	if !passes(p, done, ignored) {
		t.Error("the ignore annotation woke no pass")
	}
}

// TestALabelOnTheInstallationWakesNothing is the labeler of the contention
// specs: metadata alone wakes no pass; the spec and the status do.
func TestALabelOnTheInstallationWakesNothing(t *testing.T) {
	p := installationChanged()
	old := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 4, ResourceVersion: "10"}}
	labelled := old.DeepCopy()
	labelled.ResourceVersion, labelled.Labels = "11", map[string]string{"argocd.argoproj.io/instance": "calico"}
	if passes(p, old, labelled) {
		t.Error("a label woke a pass")
	}
	spec := labelled.DeepCopy()
	spec.Generation = 5
	if !passes(p, labelled, spec) {
		t.Error("a spec change woke no pass")
	}
	status := labelled.DeepCopy()
	status.Status.MTU = 1410
	if !passes(p, labelled, status) {
		t.Error("a status change woke no pass")
	}
	if !p.Create(event.CreateEvent{Object: old}) || !p.Delete(event.DeleteEvent{Object: old}) {
		t.Error("a create or a delete woke no pass")
	}
	cm := &corev1.ConfigMap{Data: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}}
	touched := cm.DeepCopy()
	touched.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
	if passes(configMapChanged(), cm, touched) {
		t.Error("an annotation on the services endpoint woke a pass")
	}
}

// TestARolloutsMessagesWakeNothing: the operator's Progressing message moves
// with every node; only a change of status, reason, generation, or a
// Degraded message wakes a pass.
func TestARolloutsMessagesWakeNothing(t *testing.T) {
	p := tigeraStatusChanged()
	at := func(progress, degraded string) *operatorv1.TigeraStatus {
		ts := &operatorv1.TigeraStatus{ObjectMeta: metav1.ObjectMeta{Name: "calico"}}
		ts.Status.Conditions = []operatorv1.TigeraStatusCondition{
			{Type: operatorv1.ComponentProgressing, Status: operatorv1.ConditionTrue, Reason: "ResourceNotReady", Message: progress, ObservedGeneration: 3},
			{Type: operatorv1.ComponentDegraded, Status: operatorv1.ConditionFalse},
		}
		if degraded != "" {
			ts.Status.Conditions[1] = operatorv1.TigeraStatusCondition{Type: operatorv1.ComponentDegraded, Status: operatorv1.ConditionTrue,
				Reason: "PodFailure", Message: degraded, ObservedGeneration: 3}
		}
		return ts
	}
	if passes(p, at("12 out of 1000 updated", ""), at("13 out of 1000 updated", "")) {
		t.Error("a rollout's Progressing message woke a pass")
	}
	if !passes(p, at("13 out of 1000 updated", ""), at("13 out of 1000 updated", "crash looping: calico-node-a")) {
		t.Error("Degraded woke no pass")
	}
	if !passes(p, at("", "crash looping: calico-node-a"), at("", "crash looping: calico-node-b")) {
		t.Error("a Degraded message's change woke no pass")
	}
	done := at("", "")
	done.Status.Conditions[0].Status = operatorv1.ConditionFalse
	if !passes(p, at("999 out of 1000 updated", ""), done) {
		t.Error("the end of Progressing woke no pass")
	}
}

// TestClearingAForeignRecordWakesAPass: a person clears status.originals of
// a WindowsReadiness stopped on them, as its message says, through the
// status subresource; that moves neither its generation nor its
// annotations, and must wake a pass all the same. Other status writes wake
// nothing.
func TestClearingAForeignRecordWakesAPass(t *testing.T) {
	p := Watches()[0].Predicate
	stopped := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name, Generation: 1, ResourceVersion: "10"},
		Status: v1alpha1.WindowsReadinessStatus{Originals: &v1alpha1.Originals{BGP: v1alpha1.OriginalValue{Present: true, Value: "Disabled"}},
			Conditions: []metav1.Condition{{Type: conditions.OriginalsRecorded, Status: metav1.ConditionFalse, Reason: conditions.ReasonForeignRecord}}}}
	cleared := stopped.DeepCopy()
	cleared.ResourceVersion, cleared.Status.Originals = "11", nil
	if !passes(p, stopped, cleared) {
		t.Error("clearing the originals of a WindowsReadiness stopped on them woke no pass")
	}
	recorded := stopped.DeepCopy()
	recorded.Status.Conditions[0] = metav1.Condition{Type: conditions.OriginalsRecorded, Status: metav1.ConditionTrue, Reason: conditions.ReasonOriginalsRecorded}
	rolledBack := recorded.DeepCopy()
	rolledBack.ResourceVersion, rolledBack.Status.Originals = "11", nil
	if passes(p, recorded, rolledBack) {
		t.Error("winready's own clearing of the originals at the end of a rollback woke a pass")
	}
	message := stopped.DeepCopy()
	message.ResourceVersion, message.Status.Message = "11", "another"
	if passes(p, stopped, message) {
		t.Error("a status write that leaves the originals woke a pass")
	}
}
