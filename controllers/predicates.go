package controllers

import (
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/rollout"
)

// The predicates below pass an update only when it changes what a pass
// decides from; a create and a delete always pass. An update of metadata
// alone (a GitOps agent's tracking label, a labeler, managedFields) wakes
// nothing: the steps never read it, and a pass that loses a race to it is
// requeued at once anyway (conclude).

// updatesOnly passes every create and delete, and the updates changed
// accepts.
func updatesOnly[T any](changed func(was, is T) bool) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			was, okOld := any(e.ObjectOld).(T)
			is, okNew := any(e.ObjectNew).(T)
			return !okOld || !okNew || changed(was, is)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// installationChanged passes a change of the Installation's spec (its
// generation) or of its status (status.computed, the conditions): what the
// steps and their guards read.
func installationChanged() predicate.Predicate {
	return updatesOnly(func(was, is *operatorv1.Installation) bool {
		return was.Generation != is.Generation || !equality.Semantic.DeepEqual(was.Status, is.Status)
	})
}

// tigeraStatusChanged passes a change of a TigeraStatus's conditions that a
// pass decides from: a condition's status, reason or observedGeneration, and
// the message of a Degraded one. The operator rewrites Progressing's message
// for every node a rollout updates; those wake nothing (the rollout's own
// marks do, daemonSetChanged).
func tigeraStatusChanged() predicate.Predicate {
	return updatesOnly(func(was, is *operatorv1.TigeraStatus) bool {
		return !equality.Semantic.DeepEqual(decisive(was.Status.Conditions), decisive(is.Status.Conditions))
	})
}

// decisive is what tigeraStatusChanged compares of each condition.
func decisive(conds []operatorv1.TigeraStatusCondition) []operatorv1.TigeraStatusCondition {
	out := make([]operatorv1.TigeraStatusCondition, 0, len(conds))
	for _, c := range conds {
		d := operatorv1.TigeraStatusCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, ObservedGeneration: c.ObservedGeneration}
		if c.Type == operatorv1.ComponentDegraded && c.Status == operatorv1.ConditionTrue {
			d.Message = c.Message
		}
		out = append(out, d)
	}
	return out
}

// configMapChanged passes a change of the data of a cached ConfigMap: the
// services endpoint and the rounds' reports.
func configMapChanged() predicate.Predicate {
	return updatesOnly(func(was, is *corev1.ConfigMap) bool {
		return !equality.Semantic.DeepEqual(was.Data, is.Data) || !equality.Semantic.DeepEqual(was.BinaryData, is.BinaryData) ||
			!equality.Semantic.DeepEqual(was.Labels, is.Labels)
	})
}

// podChanged passes a calico-node-windows pod's change of status, node or
// deletion, which the join watch reports (its phase, readiness and what its
// containers wait for). There is one such pod per Windows node.
//
// A calico-node pod's change passes when it becomes Ready or stops being
// so, or runs another template: the canary waits for the first nodes on the
// new calico-node (canary.go). A rollout wakes a pass about once a node.
func podChanged() predicate.Predicate {
	return updatesOnly(func(was, is *corev1.Pod) bool {
		if is.Labels[CalicoNodePodLabel] == CalicoNodePodLabelValue {
			return podReady(was) != podReady(is) || was.Spec.NodeName != is.Spec.NodeName ||
				was.Labels[templateGenerationLabel] != is.Labels[templateGenerationLabel]
		}
		return was.Spec.NodeName != is.Spec.NodeName || !was.DeletionTimestamp.Equal(is.DeletionTimestamp) ||
			!equality.Semantic.DeepEqual(was.Status, is.Status)
	})
}

// progressMarks is how many times a rollout wakes the reconciler on its way
// (besides its start and its end): once for every 2% of the nodes updated or
// available. A pass is woken at each mark, each end and each change of the
// template, and at the progress deadline by its own RequeueAfter, which
// observes whatever moved in between: the deadline never counts progress it
// did not look at.
const progressMarks = 50

// daemonSetChanged passes a change of a DaemonSet's template or annotations
// (its generation, the Tigera operator's ignore annotation), of what its
// controller has seen (observedGeneration), of the nodes it should run on,
// of whether its rollout is done, and each progress mark of a rollout. The
// thousands of status updates of a rollout over a large cluster wake a pass
// each only up to progressMarks times.
func daemonSetChanged() predicate.Predicate {
	return updatesOnly(func(was, is *appsv1.DaemonSet) bool {
		o, n := rollout.Observe(was, was.CreationTimestamp.Time), rollout.Observe(is, is.CreationTimestamp.Time)
		return was.Generation != is.Generation ||
			!equality.Semantic.DeepEqual(was.Annotations, is.Annotations) ||
			o.ObservedGeneration != n.ObservedGeneration || o.Desired != n.Desired || o.Done() != n.Done() ||
			mark(o.Updated, o.Desired) != mark(n.Updated, n.Desired) ||
			mark(o.Available, o.Desired) != mark(n.Available, n.Desired) ||
			(o.Unavailable == 0) != (n.Unavailable == 0)
	})
}

// mark is the progress mark n of desired has reached.
func mark(n, desired int32) int64 {
	if desired <= 0 {
		return 0
	}
	return int64(n) * progressMarks / int64(desired)
}

// deletesOnly passes the update that marks an object for deletion, which a
// WindowsReadiness with winready's finalizer waits on (claims.go); the API
// server moves its generation too, and this says so whatever it does.
func deletesOnly() predicate.Predicate {
	return updatesWhen(func(e event.UpdateEvent) bool {
		return e.ObjectNew.GetDeletionTimestamp() != nil && e.ObjectOld.GetDeletionTimestamp() == nil
	})
}

// updatesWhen passes the updates pass accepts, and no other event.
func updatesWhen(pass func(event.UpdateEvent) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  pass,
	}
}

// foreignRecordCleared passes the status update that clears status.originals
// of a WindowsReadiness stopped on them (OriginalsRecorded ForeignRecord):
// one way on its message offers a person, a write to the status subresource
// that moves neither its generation nor its annotations. winready clears
// them itself only at the end of a rollback, never while so stopped.
func foreignRecordCleared() predicate.Predicate {
	return updatesWhen(func(e event.UpdateEvent) bool {
		was, okOld := e.ObjectOld.(*v1alpha1.WindowsReadiness)
		is, okNew := e.ObjectNew.(*v1alpha1.WindowsReadiness)
		if !okOld || !okNew || was.Status.Originals == nil || is.Status.Originals != nil {
			return false
		}
		c := meta.FindStatusCondition(was.Status.Conditions, conditions.OriginalsRecorded)
		return c != nil && c.Reason == conditions.ReasonForeignRecord
	})
}
