package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

var _ = Describe("The preflight on seeded Calico objects", func() {
	var op *operator

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
	})

	AfterEach(func() { resetCluster(op) })

	It("refuses a Calico older than the oldest tested before any change, naming its version, until a person acknowledges it", func() {
		sim.SetCalicoVersion("v3.27.0")
		DeferCleanup(func() { sim.SetCalicoVersion("") })
		Eventually(func() string { return on.Installation().Status.CalicoVersion }).Should(Equal("v3.27.0"))
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonPreflightFailed))
		Expect(on.Check(preflight.CheckCalicoVersion)()).To(And(HaveField("Result", v1alpha1.CheckFail),
			HaveField("Message", ContainSubstring("Calico v3.27.0 is older than winready's oldest tested version"))))
		Expect(on.WR().Status.Message).To(ContainSubstring("Calico v3.27.0"))
		Expect(on.WR().Status.Originals).To(BeNil(), "a failed preflight changes nothing")

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.Acknowledge = []v1alpha1.Acknowledgement{v1alpha1.AcknowledgeUntestedCalicoVersion}
		})
		Eventually(on.Check(preflight.CheckCalicoVersion)).Should(And(HaveField("Result", v1alpha1.CheckWarn),
			HaveField("Message", ContainSubstring("(acknowledged)"))))
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
	})

	DescribeTable("reports each check with the fix",
		func(objects func() []client.Object, acknowledge []v1alpha1.Acknowledgement, name string, result v1alpha1.CheckResult, message string,
			mutate ...func(*v1alpha1.WindowsReadiness)) {
			for _, obj := range objects() {
				Expect(on.CreateOrReplace(obj)).To(Succeed())
				DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed()) })
			}
			// Paused: the preflight runs, the migration does not.
			on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
				wr.Spec.Paused = true
				wr.Spec.Preflight.Acknowledge = acknowledge
				for _, m := range mutate {
					m(wr)
				}
			})
			Eventually(on.Check(name)).Should(And(HaveField("Result", result), HaveField("Message", ContainSubstring(message))))
			if result == v1alpha1.CheckFail {
				Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonPreflightFailed))
				Expect(on.WR().Status.Originals).To(BeNil(), "a failed preflight changes nothing")
			} else {
				Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
			}
		},
		Entry("a BGPPeer fails", func() []client.Object {
			return []client.Object{&calicov3.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-a"},
				Spec: calicov3.BGPPeerSpec{PeerIP: "10.0.0.1", ASNumber: 64512}}}
		}, nil, preflight.CheckBGPPeers, v1alpha1.CheckFail, "ends the sessions of BGPPeers tor-a"),
		Entry("an acknowledged BGPPeer warns", func() []client.Object {
			return []client.Object{&calicov3.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor-a"},
				Spec: calicov3.BGPPeerSpec{PeerIP: "10.0.0.1", ASNumber: 64512}}}
		}, []v1alpha1.Acknowledgement{v1alpha1.AcknowledgeBGPPeers}, preflight.CheckBGPPeers, v1alpha1.CheckWarn, "acknowledged"),
		Entry("service advertisement fails", func() []client.Object {
			return []client.Object{&calicov3.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"},
				Spec: calicov3.BGPConfigurationSpec{ServiceClusterIPs: []calicov3.ServiceClusterIPBlock{{CIDR: "10.96.0.0/12"}}}}}
		}, nil, preflight.CheckServiceAdverts, v1alpha1.CheckFail, "advertises serviceClusterIPs"),
		Entry("a VXLAN port other than 4789 fails", func() []client.Object {
			return []client.Object{&calicov3.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"},
				Spec: calicov3.FelixConfigurationSpec{VXLANPort: ptr.To(8472)}}}
		}, nil, preflight.CheckVXLANSettings, v1alpha1.CheckFail, "vxlanPort 8472"),
		Entry("a network policy allowing node addresses warns", func() []client.Object {
			return []client.Object{&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "allow-nodes"},
				Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24"}}}}}}}}
		}, nil, preflight.CheckNodePolicies, v1alpha1.CheckWarn, "NetworkPolicy default/allow-nodes (10.0.0.0/24)"),
		Entry("a Calico global policy allowing node addresses warns", func() []client.Object {
			return []client.Object{&calicov3.GlobalNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-nodes"},
				Spec: calicov3.GlobalNetworkPolicySpec{Ingress: []calicov3.Rule{{Action: calicov3.Allow,
					Source: calicov3.EntityRule{Nets: []string{"10.0.0.12/32"}}}}}}}
		}, nil, preflight.CheckNodePolicies, v1alpha1.CheckWarn, "GlobalNetworkPolicy allow-nodes (10.0.0.12/32)"),
		Entry("a borrowed address warns", func() []client.Object {
			return []client.Object{&calicov3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "172-20-0-0-26"},
				Spec: calicov3.IPAMBlockSpec{CIDR: "172.20.0.0/26", Affinity: ptr.To("host:linux-0"),
					Allocations: append([]*int{ptr.To(0)}, make([]*int, 63)...), Unallocated: []int{},
					Attributes: []calicov3.AllocationAttribute{{HandleID: ptr.To("k8s-pod-network.x"),
						ActiveOwnerAttrs: map[string]string{"node": "linux-1", "namespace": "default", "pod": "web"}}}}}}
		}, nil, preflight.CheckBorrowed, v1alpha1.CheckWarn, "on linux-1 (1)"),
		Entry("the usual cluster passes the IP-in-IP check", func() []client.Object { return nil },
			nil, preflight.CheckIPIPPools, v1alpha1.CheckPass, "no pool uses IP-in-IP"),
		Entry("block size gives pods per Windows node", func() []client.Object { return nil },
			nil, preflight.CheckBlockSize, v1alpha1.CheckInfo, "blockSize 26 gives 60 pods per Windows node"),
		Entry("the seeded cluster has no kube-proxy for Windows nodes and warns", func() []client.Object { return nil },
			nil, preflight.CheckKubeProxy, v1alpha1.CheckWarn,
			"Windows nodes need kube-proxy in kernelspace mode as a HostProcess DaemonSet on the Calico network"),
		Entry("kube-proxy-windows on the Calico network passes", func() []client.Object {
			labels := map[string]string{"k8s-app": "kube-proxy-windows"}
			return []client.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy-windows"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
						NodeSelector: map[string]string{"kubernetes.io/os": "windows"},
						Containers: []corev1.Container{{Name: "kube-proxy", Image: "sigwindowstools/kube-proxy:v1.33.0-calico-hostprocess",
							Env: []corev1.EnvVar{{Name: "KUBE_NETWORK", Value: "Calico.*"}}}}}}}}}
		}, nil, preflight.CheckKubeProxy, v1alpha1.CheckPass,
			`DaemonSet kube-system/kube-proxy-windows runs kube-proxy on Windows nodes with KUBE_NETWORK "Calico.*"`),
		Entry("a DaemonSet without an OS selector warns with the patch", func() []client.Object {
			labels := map[string]string{"app": "node-exporter"}
			return []client.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "node-exporter"},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "node-exporter", Image: "quay.io/prometheus/node-exporter"}}}}}}}
		}, nil, preflight.CheckLinuxOnlyDS, v1alpha1.CheckWarn,
			"DaemonSets default/node-exporter select no kubernetes.io/os and would land on Windows nodes: add "+
				"spec.template.spec.nodeSelector: {kubernetes.io/os: linux} to each where it is managed (manifest, Helm values), "+
				"e.g. kubectl -n default patch ds node-exporter -p"),
		Entry("the seeded DaemonSets all select an OS", func() []client.Object { return nil },
			nil, preflight.CheckLinuxOnlyDS, v1alpha1.CheckPass, "every DaemonSet outside calico-system selects kubernetes.io/os"),
		Entry("the seeded Linux nodes are workers", func() []client.Object { return nil },
			nil, preflight.CheckLinuxWorkers, v1alpha1.CheckPass,
			"3 schedulable Linux workers run CoreDNS, the Tigera operator and Typha: linux-0, linux-1, linux-2"),
		Entry("without an expected count the capacity is information", func() []client.Object { return nil },
			nil, preflight.CheckIPAMCapacity, v1alpha1.CheckInfo,
			"default-ipv4-ippool (172.20.0.0/16): 1024 of 1024 blocks free, 60 pods per Windows node; 3 of the shared blocks go to Linux nodes "+
				"that need one (StrictAffinityCapacity)); set spec.windowsNodes.expected to check"),
		Entry("more expected Windows nodes than free blocks fail", func() []client.Object { return nil },
			nil, preflight.CheckIPAMCapacity, v1alpha1.CheckFail, "spec.windowsNodes.expected is 5000 but only 1021 blocks are free in total",
			func(wr *v1alpha1.WindowsReadiness) {
				wr.Spec.WindowsNodes = &v1alpha1.WindowsNodesSpec{Expected: ptr.To[int32](5000)}
			}),
	)
})
