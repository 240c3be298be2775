package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/windows"
)

// calico-node's pods as winready selects them, and the labels the canary
// reads: the DaemonSet controller labels each pod with the template
// generation it was made from, which the API server keeps in the
// DaemonSet's annotation and raises with every change of the template (and
// only then). A pod whose label is the DaemonSet's runs the current
// calico-node: one of the two tests the DaemonSet controller itself makes of
// a pod being up to date.
const (
	templateGenerationAnnotation = appsv1.DeprecatedTemplateGeneration
	templateGenerationLabel      = extensionsv1beta1.DaemonSetTemplateGenerationKey
	// CalicoNodePodLabel and CalicoNodePodLabelValue select calico-node's
	// pods, as windows.PodLabel selects calico-node-windows's.
	CalicoNodePodLabel      = windows.PodLabel
	CalicoNodePodLabelValue = calico.NodeDaemonSet
)

// podReady says whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// calicoNodePodOnly keeps of a calico-node pod what the canary reads: its
// name, labels, node, deletion and readiness. The cache holds one for every
// Linux node. Other pods (calico-node-windows) are kept whole.
func calicoNodePodOnly(p *corev1.Pod) *corev1.Pod {
	if p.Labels[CalicoNodePodLabel] != CalicoNodePodLabelValue {
		return p
	}
	kept := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
		ResourceVersion: p.ResourceVersion, Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName}}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			kept.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return kept
}
