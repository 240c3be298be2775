package controllers

import (
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/api/v1alpha1"
)

// Watch is one kind whose events wake a pass, and the predicate an event
// passes first.
type Watch struct {
	// Object is the kind watched, an empty object of it.
	Object client.Object
	// Metadata says the kind is watched as its metadata alone
	// (WatchesMetadata): the predicate sees a *metav1.PartialObjectMetadata.
	Metadata bool
	// Predicate passes the events that wake a pass; the others wake nothing.
	Predicate predicate.Predicate
}

// Watches is what wakes a pass: the WindowsReadiness and everything a step
// waits for, each kind with its predicate. An event of a kind not listed, or
// of an object the manager's cache does not hold (CacheOptions), wakes
// nothing. The manager watches exactly these (setupWithManager), and the
// pass-by-pass tests wake a pass through them.
func Watches() []Watch {
	return []Watch{
		{Object: &v1alpha1.WindowsReadiness{},
			Predicate: predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletesOnly(),
				foreignRecordCleared())},
		{Object: &operatorv1.Installation{}, Predicate: installationChanged()},
		{Object: &operatorv1.TigeraStatus{}, Predicate: tigeraStatusChanged()},
		{Object: &appsv1.DaemonSet{}, Predicate: daemonSetChanged()},
		{Object: &corev1.ConfigMap{}, Predicate: configMapChanged()},
		{Object: &corev1.Node{}, Metadata: true, Predicate: predicate.Or(windowsNodeChanged(), windowsNodeUpdated(), tunnelAddressAppeared())},
		// The calico-node and calico-node-windows pods, as CacheOptions
		// selects them.
		{Object: &corev1.Pod{}, Predicate: podChanged()},
	}
}
