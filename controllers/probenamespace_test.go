package controllers_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/probens"
)

// podCheckDaemonSet is the pod network check's DaemonSet the reconciler
// creates.
func podCheckDaemonSet() *appsv1.DaemonSet {
	return round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
}

// createPod creates pod in a dry run, as the DaemonSet controller would
// (admission holds anyone to the same rules there).
func createPod(pod *corev1.Pod) error {
	return k8s.Create(ctx, pod, client.DryRunAll)
}

// fromConfig is the object of kind named name in the probe namespace of
// config/default, decoded into obj.
func fromConfig(objs []*unstructured.Unstructured, kind, name string, obj runtime.Object) {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == probeNamespace && o.GetName() == name {
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, obj)).To(Succeed())
			return
		}
	}
	Fail(fmt.Sprintf("config/default has no %s %s/%s", kind, probeNamespace, name))
}

// quotaHolds is whether the live quota is computed, as the quota controller
// computes it: only then does admission enforce it.
func quotaHolds(want corev1.ResourceList) func() error {
	return func() error {
		rq := &corev1.ResourceQuota{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: probeNamespace, Name: "winready-probe"}, rq); err != nil {
			return err
		}
		for name, q := range want {
			if hard, ok := rq.Status.Hard[name]; !ok || hard.Cmp(q) != 0 {
				return fmt.Errorf("status.hard %s = %v, want %v", name, rq.Status.Hard[name], q.String())
			}
		}
		return nil
	}
}

var _ = Describe("The probe namespace's quota and limits", func() {
	It("fit a probe round and a pod network check round on 5,000 nodes, and hold the rest", func() {
		objs := install()
		quota := &corev1.ResourceQuota{}
		fromConfig(objs, "ResourceQuota", "winready-probe", quota)
		Eventually(quotaHolds(quota.Spec.Hard)).Should(Succeed(), "the quota is installed and computed")

		By("fitting both kinds of round at once on 5,000 nodes, twice over for what the quota controller has yet to release")
		// A round of each kind: its DaemonSet, and a plan and a report per
		// node; the pod network check's has a Service too.
		const nodes = 5000
		type round struct{ daemonSets, configMaps, services int64 }
		probeRound, checkRound := round{1, 2 * nodes, 0}, round{1, 2 * nodes, 1}
		need := map[corev1.ResourceName]int64{
			"count/daemonsets.apps": 2 * (probeRound.daemonSets + checkRound.daemonSets),
			// and kube-root-ca.crt, which the API server puts in every namespace
			corev1.ResourceConfigMaps: 2*(probeRound.configMaps+checkRound.configMaps) + 1,
			corev1.ResourceServices:   2 * (probeRound.services + checkRound.services),
		}
		for name, n := range need {
			hard := quota.Spec.Hard[name]
			Expect(hard.Value()).To(BeNumerically(">=", n), "%s", name)
		}
		Expect(quota.Spec.Hard).NotTo(HaveKey(corev1.ResourcePods), "Pods are bounded by the DaemonSets, one per node each")
		Expect(quota.Spec.Hard).To(HaveKeyWithValue(corev1.ResourceServicesNodePorts, resource.MustParse("0")))
		Expect(quota.Spec.Hard).To(HaveKeyWithValue(corev1.ResourceServicesLoadBalancers, resource.MustParse("0")))

		By("holding DaemonSets to the two names, so that the quota's four are never reached at once")
		ds := podCheckDaemonSet()
		ds.Name, ds.Spec.Template.Spec.ServiceAccountName = "one-too-many", ""
		Expect(k8s.Create(ctx, ds, client.DryRunAll)).To(MatchError(ContainSubstring("the only DaemonSets here are winready-probe and winready-podcheck")))

		By("giving every container a memory limit, and no container more than a probe agent needs")
		limits := &corev1.LimitRange{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: probeNamespace, Name: "winready-probe"}, limits)).To(Succeed())
		maxMemory := limits.Spec.Limits[0].Max[corev1.ResourceMemory]
		probe := probens.DaemonSetPod(probeDaemonSet(managerImage), "node-a")
		Expect(createPod(probe)).To(Succeed())
		Expect(probe.Spec.Containers[0].Resources.Limits).To(HaveKeyWithValue(corev1.ResourceMemory, maxMemory),
			"the probe agent names no resources: it gets the namespace's default")
		check := probens.DaemonSetPod(podCheckDaemonSet(), "node-a")
		Expect(createPod(check)).To(Succeed())
		Expect(check.Spec.Containers[0].Resources.Limits).To(HaveKeyWithValue(corev1.ResourceMemory, resource.MustParse("64Mi")),
			"the pod network check keeps its own")
		greedy := probens.DaemonSetPod(podCheckDaemonSet(), "node-a")
		greedy.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
		Expect(createPod(greedy)).To(MatchError(ContainSubstring("maximum memory usage per Container")))
	})
})
