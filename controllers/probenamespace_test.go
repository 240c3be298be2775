package controllers_test

import (
	"fmt"
	"maps"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

// podCheckDaemonSet is the pod network check's DaemonSet the reconciler
// creates.
func podCheckDaemonSet() *appsv1.DaemonSet {
	return round.DaemonSet(podcheck.RoundKind, probeNamespace, managerImage, "r", nil)
}

// saTokenVolume is the volume the ServiceAccount admission plugin adds to
// every Pod that mounts its token (envtest runs without that plugin).
const saTokenVolume = "kube-api-access-x7k2q"

// daemonSetPod is the Pod the DaemonSet controller makes of ds on node, as
// the API server's admission leaves it before the policies: with the
// ServiceAccount token volume mounted in every container.
func daemonSetPod(ds *appsv1.DaemonSet, node string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, GenerateName: ds.Name + "-",
			Labels: maps.Clone(ds.Spec.Template.Labels), Annotations: maps.Clone(ds.Spec.Template.Annotations)},
		Spec: *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: saTokenVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}},
	}})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: saTokenVolume, ReadOnly: true,
			MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
	}
	return pod
}

// createPod creates pod in a dry run, as the DaemonSet controller would
// (admission holds anyone to the same rules there).
func createPod(pod *corev1.Pod) error {
	return k8s.Create(ctx, pod, client.DryRunAll)
}

var _ = Describe("Pods in the probe namespace", func() {
	It("are held to the probe's and the pod network check's shape, whoever creates them", func() {
		Eventually(func() error { return createPod(daemonSetPod(probeDaemonSet(managerImage), "node-a")) }).
			Should(Succeed(), "the probe's Pod, as the DaemonSet controller makes it")
		Expect(createPod(daemonSetPod(podCheckDaemonSet(), "node-a"))).To(Succeed(), "the pod network check's Pod")

		// A runtime class must exist for the API server to admit its name.
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "unconfined"}, Handler: "unconfined"}
		Expect(k8s.Create(ctx, rc)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, rc)).To(Succeed()) })
		for why, change := range podTemplatePins {
			for _, ds := range []*appsv1.DaemonSet{probeDaemonSet(managerImage), podCheckDaemonSet()} {
				change(ds)
				Expect(createPod(daemonSetPod(ds, "node-a"))).To(MatchError(ContainSubstring(why)), "a Pod of %s: %s", ds.Name, why)
			}
		}
		rejected := map[string]func(*corev1.Pod){
			"mounts no volumes": func(p *corev1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			},
			"manager's own image": func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example.com/attacker:latest" },
			"its fixed command":   func(p *corev1.Pod) { p.Spec.Containers[0].Args = []string{"respond"} },
			"adds only NET_RAW": func(p *corev1.Pod) {
				caps := p.Spec.Containers[0].SecurityContext.Capabilities
				caps.Add = append(caps.Add, "SYS_ADMIN")
			},
			// Another identity does not make a Pod more than the probe.
			"only the probe uses the host network": func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" },
			"no priority class": func(p *corev1.Pod) {
				p.Spec.PriorityClassName = "system-cluster-critical"
			},
		}
		for why, change := range rejected {
			pod := daemonSetPod(probeDaemonSet(managerImage), "node-a")
			change(pod)
			Expect(createPod(pod)).To(MatchError(ContainSubstring(why)), why)
		}
		check := daemonSetPod(podCheckDaemonSet(), "node-a")
		check.Spec.Containers[0].Args = []string{"probe", "--namespace=" + probeNamespace}
		Expect(createPod(check)).To(MatchError(ContainSubstring("the pod network check runs its fixed command")))
		check = daemonSetPod(podCheckDaemonSet(), "node-a")
		check.Spec.Volumes[0].Projected.Sources = append(check.Spec.Volumes[0].Projected.Sources,
			corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "any"}}})
		Expect(createPod(check)).To(MatchError(ContainSubstring("no Secret in a projected volume")))

		By("holding a running probe Pod to its shape: no ephemeral container, no other image")
		pod := daemonSetPod(probeDaemonSet(managerImage), "node-a")
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed()) })
		debug := pod.DeepCopy()
		debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: managerImage, Args: []string{"probe", "--namespace=" + probeNamespace},
			SecurityContext: pod.Spec.Containers[0].SecurityContext.DeepCopy()}}}
		Expect(k8s.SubResource("ephemeralcontainers").Update(ctx, debug)).
			To(MatchError(ContainSubstring("no init or ephemeral containers")))
		swapped := pod.DeepCopy()
		swapped.Spec.Containers[0].Image = "registry.example.com/attacker:latest"
		Expect(k8s.Update(ctx, swapped, client.DryRunAll)).To(MatchError(ContainSubstring("manager's own image")))

		By("releasing a Pod of an earlier image: an update that leaves the spec alone is not evaluated")
		setManagerImage("registry.example.com/winready:v2")
		DeferCleanup(setManagerImage, managerImage)
		Eventually(func() error { return createPod(daemonSetPod(probeDaemonSet(managerImage), "node-a")) }).
			Should(MatchError(ContainSubstring("manager's own image")), "the upgraded manager's image is in force")
		relabelled := pod.DeepCopy()
		relabelled.Labels["example.com/x"] = "y"
		Expect(k8s.Update(ctx, relabelled, client.DryRunAll)).To(Succeed())
	})

	It("run only as the pod network check under its ServiceAccount", func() {
		other := podCheckDaemonSet()
		other.Name = "other"
		Eventually(func() error { return createAsManager(other) }).
			Should(MatchError(ContainSubstring("only the pod network check runs as the winready-podcheck ServiceAccount")))
		other.Spec.Template.Spec.ServiceAccountName = ""
		Expect(createAsManager(other)).To(MatchError(ContainSubstring("the only DaemonSets here are winready-probe and winready-podcheck")),
			"another DaemonSet at the restricted level, under another identity")
	})
})

var _ = Describe("ConfigMaps in the probe namespace", func() {
	It("are only the plans, of all the manager may create there", func() {
		cm := func(name string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: name}}
		}
		Eventually(func() error { return createAsManager(cm("other")) }).
			Should(MatchError(ContainSubstring("the manager writes only the plans here")))
		Expect(createAsManager(cm(probe.RoundKind.ReportName("node-a")))).To(MatchError(ContainSubstring("the manager writes only the plans here")),
			"the agents write the reports")
		Expect(createAsManager(cm(probe.RoundKind.PlanName("node-a")))).To(MatchError(ContainSubstring("its round's label")),
			"a plan carries its round")
		Expect(createAsManager(planConfigMap(probe.RoundKind, "node-a"))).To(Succeed())
		Expect(createAsManager(planConfigMap(podcheck.RoundKind, "node-a"))).To(Succeed())
	})
})

// planConfigMap is a plan of kind for node as the round engine writes it:
// labelled with its kind and round, holding the node and the plan.
func planConfigMap(k round.Kind, node string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: k.PlanName(node),
			Labels: map[string]string{round.ComponentLabel: k.Component, round.PlanLabel: "r"}},
		Data: map[string]string{round.NodeKey: node, round.PlanKey: "{}"},
	}
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
		probe := daemonSetPod(probeDaemonSet(managerImage), "node-a")
		Expect(createPod(probe)).To(Succeed())
		Expect(probe.Spec.Containers[0].Resources.Limits).To(HaveKeyWithValue(corev1.ResourceMemory, maxMemory),
			"the probe agent names no resources: it gets the namespace's default")
		check := daemonSetPod(podCheckDaemonSet(), "node-a")
		Expect(createPod(check)).To(Succeed())
		Expect(check.Spec.Containers[0].Resources.Limits).To(HaveKeyWithValue(corev1.ResourceMemory, resource.MustParse("64Mi")),
			"the pod network check keeps its own")
		greedy := daemonSetPod(podCheckDaemonSet(), "node-a")
		greedy.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
		Expect(createPod(greedy)).To(MatchError(ContainSubstring("maximum memory usage per Container")))
	})
})

// peer is a pod as a NetworkPolicy sees it.
type peer struct {
	namespace string
	labels    map[string]string
}

// icmp stands for ICMP, which a NetworkPolicy port cannot name: only a rule
// without ports admits it.
const icmp corev1.Protocol = "ICMP"

// ingressAllowed is whether policies (networking.k8s.io/v1 semantics) let
// from reach to on protocol and port: a pod no policy selects for ingress
// accepts everything; a selected one, what some rule of a selecting policy
// allows. Pods on the host network are never selected.
func ingressAllowed(policies []networkingv1.NetworkPolicy, to, from peer, protocol corev1.Protocol, port int32) bool {
	isolated := false
	for _, p := range policies {
		if p.Namespace != to.namespace || !selects(&p.Spec.PodSelector, to.labels) ||
			!slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		isolated = true
		for _, rule := range p.Spec.Ingress {
			if peersMatch(rule.From, p.Namespace, from) && portsMatch(rule.Ports, protocol, port) {
				return true
			}
		}
	}
	return !isolated
}

func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	Expect(err).NotTo(HaveOccurred())
	return s.Matches(labels.Set(set))
}

func peersMatch(peers []networkingv1.NetworkPolicyPeer, ns string, from peer) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		Expect(p.IPBlock).To(BeNil(), "no address block: pods are matched by their labels")
		inNamespace := from.namespace == ns
		if p.NamespaceSelector != nil {
			inNamespace = selects(p.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": from.namespace})
		}
		if inNamespace && (p.PodSelector == nil || selects(p.PodSelector, from.labels)) {
			return true
		}
	}
	return false
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, protocol corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto == protocol && (p.Port == nil || p.Port.IntValue() == int(port)) {
			return true
		}
	}
	return false
}

var _ = Describe("The probe namespace's NetworkPolicies", func() {
	It("let only the pod network check's pods reach one another", func() {
		var policies []networkingv1.NetworkPolicy
		for _, o := range install() {
			if o.GetKind() != "NetworkPolicy" {
				continue
			}
			np := networkingv1.NetworkPolicy{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &np)).To(Succeed())
			Expect(np.Namespace).To(Equal(probeNamespace))
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&np), &networkingv1.NetworkPolicy{})).To(Succeed(), "installed")
			policies = append(policies, np)
		}
		Expect(policies).NotTo(BeEmpty())

		checkPod := podCheckDaemonSet().Spec.Template
		Expect(checkPod.Spec.HostNetwork).To(BeFalse())
		check := peer{probeNamespace, checkPod.Labels}
		Expect(ingressAllowed(policies, check, check, corev1.ProtocolTCP, podcheck.Port)).To(BeTrue(), "the echo, between check pods")
		Expect(ingressAllowed(policies, check, check, icmp, 0)).To(BeTrue(), "the ping, between check pods")

		elsewhere := peer{"default", checkPod.Labels}
		Expect(ingressAllowed(policies, check, elsewhere, corev1.ProtocolTCP, podcheck.Port)).To(BeFalse(),
			"a pod in another namespace, even labelled as a check pod")
		Expect(ingressAllowed(policies, check, elsewhere, icmp, 0)).To(BeFalse())
		other := peer{probeNamespace, map[string]string{"app.kubernetes.io/name": "winready", "app.kubernetes.io/component": "other"}}
		Expect(ingressAllowed(policies, check, other, corev1.ProtocolTCP, podcheck.Port)).To(BeFalse(), "another pod here")
		Expect(ingressAllowed(policies, other, check, corev1.ProtocolTCP, 8080)).To(BeFalse(),
			"another pod here on the pod network accepts nothing either")

		// The UDP probe's pods use the host network, which NetworkPolicy does
		// not reach: their packets are authenticated instead.
		Expect(probeDaemonSet(managerImage).Spec.Template.Spec.HostNetwork).To(BeTrue())
	})
})
