package install

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestTheManagerRunsAsTeamsRunIt checks the manager's Deployment as
// config/default installs it: on Linux nodes only, its replicas spread over
// nodes, and a drain takes at most one of them.
func TestTheManagerRunsAsTeamsRunIt(t *testing.T) {
	objs, err := Build("../../config/default")
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	var pdb *policyv1.PodDisruptionBudget
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			dep = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, dep); err != nil {
				t.Fatal(err)
			}
		case "PodDisruptionBudget":
			pdb = &policyv1.PodDisruptionBudget{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, pdb); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dep == nil || pdb == nil {
		t.Fatalf("config/default has Deployment %v and PodDisruptionBudget %v", dep != nil, pdb != nil)
	}
	pod := dep.Spec.Template
	if got := pod.Spec.NodeSelector["kubernetes.io/os"]; got != "linux" {
		t.Errorf("nodeSelector kubernetes.io/os = %q, want linux", got)
	}
	podLabels := labels.Set(pod.Labels)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(podLabels) || pdb.Namespace != dep.Namespace {
		t.Errorf("the PodDisruptionBudget %s/%s (%v) does not cover the manager's pods %v", pdb.Namespace, pdb.Name, pdb.Spec.Selector, podLabels)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	aa := pod.Spec.Affinity
	if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Fatal("no pod anti-affinity between the replicas")
	}
	term := aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	antiSel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil || term.TopologyKey != "kubernetes.io/hostname" || !antiSel.Matches(podLabels) {
		t.Errorf("the anti-affinity term %+v does not keep the replicas on different nodes", term)
	}
}
