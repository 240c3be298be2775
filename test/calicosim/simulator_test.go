package calicosim_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/test/calicosim"
)

const (
	settleTimeout = 30 * time.Second
	poll          = 5 * time.Millisecond
)

var ctx = context.Background()

var _ = Describe("the simulated Tigera operator", func() {
	AfterEach(func() {
		Expect(calicosim.Clean(ctx, k8s)).To(Succeed())
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "default"}, &operatorv1.Installation{})).To(Satisfy(apierrors.IsNotFound))
		nodes := &corev1.NodeList{}
		Expect(k8s.List(ctx, nodes)).To(Succeed())
		Expect(nodes.Items).To(BeEmpty(), "Clean leaves no node behind")
	})

	Context("with native projectcalico.org/v3 CRDs", func() {
		var sim *calicosim.Simulator
		BeforeEach(func() {
			sim = startSimulator(calicosim.Options{})
			Expect(calicosim.Seed(ctx, k8s, calicosim.MainCluster())).To(Succeed())
		})

		It("keeps a seeded MainCluster at rest, Available at the Installation's generation", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			Expect(installation().Generation).To(BeEquivalentTo(1), "the seeded spec already carries the operator's defaults")
			pool := ipPool("default-ipv4-ippool")
			Expect(pool.Spec.VXLANMode).To(Equal(calicov3.VXLANModeCrossSubnet))
			Expect(pool.Spec.IPIPMode).To(Equal(calicov3.IPIPModeNever))
			Expect(pool.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "tigera-operator"))
			ds := daemonSet("calico-node")
			Expect(env(ds, "CALICO_NETWORKING_BACKEND")).To(Equal("bird"))
			Expect(env(ds, "CLUSTER_TYPE")).To(Equal("k8s,operator,bgp"))
			Expect(ds.Status.DesiredNumberScheduled).To(BeEquivalentTo(3))
			// The simulated DaemonSet controller may have raced Seed to the
			// new DaemonSets' status; once settled, nothing more is written.
			settled := sim.Writes()
			Expect(settled).NotTo(HaveKey(ContainSubstring("Installation")), "the seeded spec needs no defaulting")
			Consistently(sim.Writes).WithTimeout(300*time.Millisecond).WithPolling(20*time.Millisecond).Should(Equal(settled),
				"the simulated operator finds nothing to change in a seeded cluster")
		})

		It("turns a pool's encapsulation VXLAN into IPPool vxlanMode Always without rolling calico-node", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			patchInstallation(`[
				{"op":"test","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLANCrossSubnet"},
				{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLAN"}]`)

			Eventually(func(g Gomega) {
				pool := ipPool("default-ipv4-ippool")
				g.Expect(pool.Spec.VXLANMode).To(Equal(calicov3.VXLANModeAlways))
				g.Expect(pool.Spec.IPIPMode).To(Equal(calicov3.IPIPModeNever))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			Expect(daemonSet("calico-node").Generation).To(BeEquivalentTo(1), "encapsulation does not touch the calico-node template")
		})

		It("reverts a direct edit of a pool it owns", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			pool := ipPool("default-ipv4-ippool")
			pool.Spec.VXLANMode = calicov3.VXLANModeAlways
			Expect(k8s.Update(ctx, pool)).To(Succeed())
			Eventually(func() calicov3.VXLANMode { return ipPool("default-ipv4-ippool").Spec.VXLANMode }).
				WithPolling(poll).WithTimeout(settleTimeout).Should(Equal(calicov3.VXLANModeCrossSubnet))
		})

		It("keeps the address of a deleted services endpoint ConfigMap in calico-node until the operator restarts", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			service := env(daemonSet("calico-node"), "KUBERNETES_SERVICE_HOST")
			Expect(service).NotTo(BeEmpty(), "the operator's pod environment names the kubernetes Service")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tigera-operator", Name: "kubernetes-services-endpoint"},
				Data: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10", "KUBERNETES_SERVICE_PORT": "6443"}}
			Expect(k8s.Create(ctx, cm)).To(Succeed())
			Eventually(func() string { return env(daemonSet("calico-node"), "KUBERNETES_SERVICE_HOST") }).
				WithPolling(poll).WithTimeout(settleTimeout).Should(Equal("10.0.0.10"))
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())

			Expect(k8s.Delete(ctx, cm)).To(Succeed())
			Consistently(func() string { return env(daemonSet("calico-node"), "KUBERNETES_SERVICE_HOST") }).
				WithPolling(poll).WithTimeout(time.Second).Should(Equal("10.0.0.10"), "the operator keeps the values it last read")

			sim.RestartOperator()
			Eventually(func() string { return env(daemonSet("calico-node"), "KUBERNETES_SERVICE_HOST") }).
				WithPolling(poll).WithTimeout(settleTimeout).Should(Equal(service), "a restarted operator reads its environment again")
		})

		It("creates FelixConfiguration default with the VXLAN VNI and port", func() {
			Eventually(func(g Gomega) {
				fc := &calicov3.FelixConfiguration{}
				g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "default"}, fc)).To(Succeed())
				g.Expect(fc.Spec.VXLANVNI).To(HaveValue(Equal(4096)))
				g.Expect(fc.Spec.VXLANPort).To(HaveValue(Equal(4789)))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
		})

		It("reports the Windows controller's checks in the operator's order as each prerequisite arrives", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			windowsDegraded := func(want string) {
				GinkgoHelper()
				Eventually(func(g Gomega) {
					c := condition(g, calicosim.StatusCalicoWindows, operatorv1.ComponentDegraded)
					g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
					g.Expect(c.Message).To(HavePrefix(want))
				}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			}
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"}]`)
			windowsDegraded(`Error reading services endpoint configmap: configmaps "kubernetes-services-endpoint" not found`)

			Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tigera-operator", Name: "kubernetes-services-endpoint"},
				Data: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10", "KUBERNETES_SERVICE_PORT": "6443"}})).To(Succeed())
			windowsDegraded("Invalid Installation provided: installation spec.ServiceCIDRs must be provided")

			patchInstallation(`[{"op":"add","path":"/spec/serviceCIDRs","value":["10.96.0.0/12"]}]`)
			windowsDegraded("Invalid Installation provided: IPv4 IPPool encapsulation VXLANCrossSubnet is not supported")

			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLAN"}]`)
			windowsDegraded("Invalid StrictAffinity")

			ipam := &calicov3.IPAMConfiguration{}
			Expect(k8s.Get(ctx, types.NamespacedName{Name: "default"}, ipam)).To(Succeed())
			ipam.Spec.StrictAffinity = true
			Expect(k8s.Update(ctx, ipam)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(condition(g, calicosim.StatusCalicoWindows, operatorv1.ComponentAvailable).Status).To(Equal(operatorv1.ConditionTrue))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
		})

		It("renders the overlay's bgp over default's, and writes only the merged spec into status.computed", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			bgpOn := operatorv1.BGPEnabled
			overlay := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: "overlay"},
				Spec: operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: &bgpOn}}}
			Expect(k8s.Create(ctx, overlay)).To(Succeed())
			patchInstallation(`[
				{"op":"test","path":"/spec/calicoNetwork/bgp","value":"Enabled"},
				{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)
			Eventually(func(g Gomega) {
				ok, why, err := calicosim.Settled(ctx, k8s)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ok).To(BeTrue(), why)
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			Consistently(func() string { return env(daemonSet("calico-node"), "CALICO_NETWORKING_BACKEND") }).
				WithTimeout(300*time.Millisecond).WithPolling(20*time.Millisecond).Should(Equal("bird"), "the overlay's bgp Enabled wins")
			Expect(installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)), "default keeps its own value")
			Expect(installation().Status.Computed.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)))

			Expect(k8s.Delete(ctx, overlay)).To(Succeed())
			Eventually(func() string { return env(daemonSet("calico-node"), "CALICO_NETWORKING_BACKEND") }).
				WithPolling(poll).WithTimeout(settleTimeout).Should(Equal("vxlan"), "without the overlay default's bgp Disabled is rendered")
		})

		It("looks the DNS Service up by the Installation's kubernetesProvider", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tigera-operator", Name: "kubernetes-services-endpoint"},
				Data: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10", "KUBERNETES_SERVICE_PORT": "6443"}})).To(Succeed())
			ipam := &calicov3.IPAMConfiguration{}
			Expect(k8s.Get(ctx, types.NamespacedName{Name: "default"}, ipam)).To(Succeed())
			ipam.Spec.StrictAffinity = true
			Expect(k8s.Update(ctx, ipam)).To(Succeed())
			patchInstallation(`[{"op":"add","path":"/spec/kubernetesProvider","value":"RKE2"},
				{"op":"add","path":"/spec/serviceCIDRs","value":["10.96.0.0/12"]},
				{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLAN"},
				{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"}]`)
			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalicoWindows, operatorv1.ComponentDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
				g.Expect(c.Message).To(HavePrefix("rke2-coredns-rke2-coredns service not found"), "kube-dns exists but is not RKE2's")
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())

			Expect(k8s.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "rke2-coredns-rke2-coredns"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}})).To(Succeed())
			Eventually(func() error {
				return k8s.Get(ctx, types.NamespacedName{Namespace: "calico-system", Name: "calico-node-windows"}, &appsv1.DaemonSet{})
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed(), "the Service's arrival wakes the Windows controller")
		})

		It("rejects bgp Disabled while an IPv6 pool is unencapsulated", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			patchInstallation(`[{"op":"add","path":"/spec/calicoNetwork/ipPools/-","value":{"name":"default-ipv6-ippool","cidr":"fd00:10:244::/64"}}]`)
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			pool := &calicov3.IPPool{}
			Expect(k8s.Get(ctx, types.NamespacedName{Name: "default-ipv6-ippool"}, pool)).To(Succeed())
			Expect(pool.Spec.VXLANMode).To(BeEmpty(), "native v3 CRDs leave vxlanMode empty for an unencapsulated pool")

			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)
			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalico, operatorv1.ComponentDegraded)
				g.Expect(c.Message).To(Equal("Invalid Installation provided: with BIRD cluster routing mode, unencapsulated IP pools require that BGP is enabled"))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			Expect(env(daemonSet("calico-node"), "CALICO_NETWORKING_BACKEND")).To(Equal("bird"), "nothing is rendered")
		})

		It("rejects bgp Disabled with the VPP dataplane", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			patchInstallation(`[{"op":"add","path":"/spec/calicoNetwork/linuxDataplane","value":"VPP"},
				{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)
			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalico, operatorv1.ComponentDegraded)
				g.Expect(c.Message).To(Equal("Invalid Installation provided: VPP requires BGP to be enabled"))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			Expect(env(daemonSet("calico-node"), "CALICO_NETWORKING_BACKEND")).To(Equal("bird"), "nothing is rendered")
		})

		It("rejects windowsDataplane HNS without serviceCIDRs while the Windows controller waits for the ConfigMap", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"}]`)
			gen := installation().Generation

			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalico, operatorv1.ComponentDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
				g.Expect(c.Reason).To(Equal(string(operatorv1.InvalidConfigurationError)))
				// The operator validates with the address its pod started with (the kubernetes Service's).
				g.Expect(c.Message).To(Equal("Invalid Installation provided: installation spec.ServiceCIDRs must be provided when using Calico CNI on Windows"))
				g.Expect(c.ObservedGeneration).To(Equal(gen))
				g.Expect(condition(g, calicosim.StatusCalico, operatorv1.ComponentAvailable).Status).To(Equal(operatorv1.ConditionFalse))

				w := condition(g, calicosim.StatusCalicoWindows, operatorv1.ComponentDegraded)
				g.Expect(w.Status).To(Equal(operatorv1.ConditionTrue))
				g.Expect(w.Message).To(Equal(`Error reading services endpoint configmap: configmaps "kubernetes-services-endpoint" not found`))
				g.Expect(w.ObservedGeneration).To(BeZero())
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())

			Expect(installation().Spec.WindowsNodes).To(BeNil(), "an invalid Installation is not defaulted")
			err := k8s.Get(ctx, types.NamespacedName{Namespace: "calico-system", Name: "calico-node-windows"}, &appsv1.DaemonSet{})
			Expect(err).To(Satisfy(apierrors.IsNotFound), "nothing is rendered for an invalid Installation")
		})

		It("refuses an Installation asking calico-node to update OnDelete, and renders nothing", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			patchInstallation(`[{"op":"replace","path":"/spec/nodeUpdateStrategy/type","value":"OnDelete"},` +
				`{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)
			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalico, operatorv1.ComponentDegraded)
				g.Expect(c.Reason).To(Equal(string(operatorv1.InvalidConfigurationError)))
				g.Expect(c.Message).To(HavePrefix("Invalid Installation provided: installation spec.NodeUpdateStrategy.type '"))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			Expect(env(daemonSet("calico-node"), "CALICO_NETWORKING_BACKEND")).To(Equal("bird"), "nothing is rendered")
			Expect(daemonSet("calico-node").Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateDaemonSetStrategyType))
		})

		It("leaves an ignored calico-node as it is, and renders it at the next Installation change once the annotation is off", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			annotate := func(op string) {
				ds := daemonSet("calico-node")
				patch := `[{"op":"` + op + `","path":"/metadata/annotations/unsupported.operator.tigera.io~1ignore"` + map[string]string{"add": `,"value":"true"}]`, "remove": `}]`}[op]
				Expect(k8s.Patch(ctx, ds, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
			}
			annotate("add")
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)
			gen := installation().Generation
			Eventually(func(g Gomega) {
				g.Expect(condition(g, calicosim.StatusCalico, operatorv1.ComponentAvailable).ObservedGeneration).To(Equal(gen))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed(), "the operator read the Installation")
			Expect(env(daemonSet("calico-node"), "CALICO_NETWORKING_BACKEND")).To(Equal("bird"), "and left calico-node alone")

			// That the annotation coming off wakes no reconcile by itself is the
			// DaemonSet watch's predicate (core_internal_test.go): a reconcile
			// still queued from the operator's own status writes may run after
			// it, as the real operator's would, so it is not asserted here.
			annotate("remove")
			Expect(k8s.Patch(ctx, installation(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"touched":"now"}}}`)))).To(Succeed())
			Eventually(func() string { return env(daemonSet("calico-node"), "CALICO_NETWORKING_BACKEND") }).
				WithPolling(poll).WithTimeout(settleTimeout).Should(Equal("vxlan"))
		})

		It("reports a crash loop as calico Degraded until the fault clears", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			msg := "Pod calico-system/calico-node-x7k2p has crash looping container: calico-node"
			sim.InjectFault(msg)
			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalico, operatorv1.ComponentDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
				g.Expect(c.Reason).To(Equal(string(operatorv1.PodFailure)))
				g.Expect(c.Message).To(Equal(msg))
				g.Expect(condition(g, calicosim.StatusCalico, operatorv1.ComponentAvailable).Status).To(Equal(operatorv1.ConditionFalse))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())

			sim.ClearFault()
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
		})
	})

	Context("with a spec as a user wrote it", func() {
		var sim *calicosim.Simulator
		BeforeEach(func() {
			cl := calicosim.MainCluster()
			cl.AsWritten = true
			// Seeded before the operator starts, as an Installation applied
			// with the operator: its first reconcile reads the seeded pools
			// from a synced cache. Started first, its cache could see the
			// Installation before the IPPools written just before it (two
			// watches, no order between them), default without the pools,
			// and patch node address autodetection in a third patch.
			Expect(calicosim.Seed(ctx, k8s, cl)).To(Succeed())
			sim = startSimulator(calicosim.Options{})
		})

		It("writes the operator's defaults on first sight and settles at the new generation", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())

			inst := installation()
			// Each controller's defaults patch bumps the generation once. A controller
			// woken by another object's event may read the Installation from its cache
			// before its own patch reached it and send that patch again, as the Tigera
			// operator does: a write that changes nothing, so the patches are not counted.
			Expect(inst.Generation).To(BeEquivalentTo(3), "one defaults patch from the core controller, one from the pool controller")
			cn := inst.Spec.CalicoNetwork
			Expect(cn.HostPorts).To(HaveValue(Equal(operatorv1.HostPortsEnabled)))
			Expect(cn.LinuxDataplane).To(HaveValue(Equal(operatorv1.LinuxDataplaneIptables)))
			Expect(cn.WindowsDataplane).To(HaveValue(Equal(operatorv1.WindowsDataplaneDisabled)))
			Expect(inst.Spec.WindowsNodes).To(BeNil())
			Expect(cn.IPPools[0].NodeSelector).To(Equal("all()"))
			Expect(cn.IPPools[0].AllowedUses).To(ConsistOf(operatorv1.IPPoolAllowedUseWorkload, operatorv1.IPPoolAllowedUseTunnel))
			Expect(cn.IPPools[0].Encapsulation).To(Equal(operatorv1.EncapsulationVXLANCrossSubnet), "a set field is left alone")
			Expect(inst.Status.Variant).To(Equal(operatorv1.Calico))
			Expect(inst.Status.Computed).To(Equal(&inst.Spec), "status.computed holds the defaulted spec")
			Expect(daemonSet("calico-node").Generation).To(BeEquivalentTo(1), "defaults do not change the calico-node template")

			before := sim.Writes()
			GinkgoWriter.Printf("writes from seed to settled: %v\n", before)
			Consistently(sim.Writes).WithTimeout(300*time.Millisecond).WithPolling(20*time.Millisecond).Should(Equal(before),
				"nothing more is written once settled")
		})
	})

	Context("with a rollout slow enough to watch", func() {
		BeforeEach(func() {
			startSimulator(calicosim.Options{RolloutStep: 200 * time.Millisecond})
			Expect(calicosim.Seed(ctx, k8s, calicosim.MainCluster())).To(Succeed())
		})

		It("rolls calico-node out node by node when BGP is disabled", func() {
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			patchInstallation(`[
				{"op":"test","path":"/spec/calicoNetwork/bgp","value":"Enabled"},
				{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)

			var messages []string
			var updated []int32
			Eventually(func(g Gomega) {
				if c := condition(g, calicosim.StatusCalico, operatorv1.ComponentProgressing); c.Status == operatorv1.ConditionTrue {
					messages = append(messages, c.Message)
				}
				if ds := daemonSet("calico-node"); ds.Status.ObservedGeneration == 2 {
					updated = append(updated, ds.Status.UpdatedNumberScheduled)
				}
				ok, why, err := calicosim.Settled(ctx, k8s)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ok).To(BeTrue(), why)
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())

			// The last poll read the DaemonSet before it found the cluster
			// settled, and may have read it one node short: the settled
			// DaemonSet is the last of what was seen.
			ds := daemonSet("calico-node")
			updated = append(updated, ds.Status.UpdatedNumberScheduled)
			Expect(ds.Generation).To(BeEquivalentTo(2), "the template changed once")
			Expect(env(ds, "CALICO_NETWORKING_BACKEND")).To(Equal("vxlan"))
			Expect(env(ds, "CLUSTER_TYPE")).To(Equal("k8s,operator"))
			Expect(ds.Spec.Template.Spec.Containers[0].ReadinessProbe.Exec.Command).To(Equal([]string{"/bin/calico-node", "-felix-ready"}))
			Expect(messages).To(ContainElement(MatchRegexp(`^DaemonSet "calico-system/calico-node" update is rolling out \([0-2] out of 3 updated\)$`)))
			Expect(updated).To(ContainElement(BeNumerically("<", 3)), "the rollout was seen under way")
			for i := 1; i < len(updated); i++ {
				Expect(updated[i]).To(BeNumerically(">=", updated[i-1]), "nodes are updated one after another, never undone")
			}
			Expect(updated[len(updated)-1]).To(BeEquivalentTo(3))
			Expect(condition(Default, calicosim.StatusCalico, operatorv1.ComponentAvailable).Reason).To(Equal("AllObjectsAvailable"))
		})
	})

	Context("with every Windows prerequisite in place", func() {
		BeforeEach(func() {
			startSimulator(calicosim.Options{})
			cl := calicosim.MainCluster()
			cl.Nodes = append(cl.Nodes, calicosim.Node{Name: "win-0", InternalIP: "10.0.0.21", Windows: true})
			cl.Pools[0].Encapsulation = operatorv1.EncapsulationVXLAN
			cl.BGP = operatorv1.BGPDisabled
			cl.StrictAffinity = ptr(true)
			cl.ServicesEndpoint = map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.10", "KUBERNETES_SERVICE_PORT": "6443"}
			cl.ServiceCIDRs = []string{"10.96.0.0/12"}
			Expect(calicosim.Seed(ctx, k8s, cl)).To(Succeed())
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
		})

		It("keeps calico-windows Degraded while the ImageSet of the running version lacks the Windows images", func() {
			set := &operatorv1.ImageSet{ObjectMeta: metav1.ObjectMeta{Name: "calico-v3.32.0"},
				Spec: operatorv1.ImageSetSpec{Images: []operatorv1.Image{{Image: "calico/node", Digest: "sha256:1"}}}}
			Expect(k8s.Create(ctx, set)).To(Succeed())
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"}]`)
			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalicoWindows, operatorv1.ComponentDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
				g.Expect(c.Message).To(Equal("Error resolving ImageSet for components: invalid ImageSet: " +
					"ImageSet did not contain image calico/cni-windows,ImageSet did not contain image calico/node-windows"))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "calico-system", Name: "calico-node-windows"}, &appsv1.DaemonSet{})).
				To(Satisfy(apierrors.IsNotFound), "nothing is rendered")

			set.Spec.Images = append(set.Spec.Images, operatorv1.Image{Image: "calico/cni-windows", Digest: "sha256:2"},
				operatorv1.Image{Image: "calico/node-windows", Digest: "sha256:3"})
			Expect(k8s.Update(ctx, set)).To(Succeed())
			Eventually(func() error {
				return k8s.Get(ctx, types.NamespacedName{Namespace: "calico-system", Name: "calico-node-windows"}, &appsv1.DaemonSet{})
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed(), "the ImageSet's change wakes the Windows controller")
		})

		It("renders calico-node-windows and defaults spec.windowsNodes once windowsDataplane is HNS", func() {
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"}]`)

			Eventually(func(g Gomega) {
				ds := &appsv1.DaemonSet{}
				g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "calico-system", Name: "calico-node-windows"}, ds)).To(Succeed())
				g.Expect(ds.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"kubernetes.io/os": "windows"}))
				g.Expect(env(ds, "KUBERNETES_SERVICE_CIDRS")).To(Equal("10.96.0.0/12"))
				g.Expect(env(ds, "VXLAN_VNI")).To(Equal("4096"))
				g.Expect(env(ds, "KUBERNETES_SERVICE_HOST")).To(Equal("10.0.0.10"))
				g.Expect(env(ds, "CALICO_NETWORKING_BACKEND")).To(Equal("vxlan"))
				g.Expect(calicosim.RolledOut(ds)).To(BeTrue())
				g.Expect(ds.Status.DesiredNumberScheduled).To(BeEquivalentTo(1))

				w := condition(g, calicosim.StatusCalicoWindows, operatorv1.ComponentAvailable)
				g.Expect(w.Status).To(Equal(operatorv1.ConditionTrue))
				g.Expect(w.ObservedGeneration).To(BeZero())
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())

			Expect(installation().Spec.WindowsNodes).To(Equal(&operatorv1.WindowsNodeSpec{
				CNIBinDir: "/opt/cni/bin", CNIConfigDir: "/etc/cni/net.d", CNILogDir: "/var/log/calico/cni",
			}))
			Expect(daemonSet("calico-node").Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"kubernetes.io/os": "linux"}))

			By("rejecting Windows off while spec.windowsNodes is still set")
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"Disabled"}]`)
			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalico, operatorv1.ComponentDegraded)
				g.Expect(c.Message).To(Equal("Invalid Installation provided: installation spec.WindowsNodes is not valid and should not be provided when Calico for Windows is disabled"))
				g.Expect(c.ObservedGeneration).To(Equal(installation().Generation))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())

			By("settling once the rollback clears spec.windowsNodes, leaving calico-node-windows behind")
			patchInstallation(`[{"op":"remove","path":"/spec/windowsNodes"}]`)
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			Expect(installation().Spec.WindowsNodes).To(BeNil(), "the operator never writes windowsNodes while Windows is off")
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "calico-system", Name: "calico-node-windows"}, &appsv1.DaemonSet{})).To(Succeed())
		})

		It("rejects HNS while the first IPv4 pool is still VXLANCrossSubnet", func() {
			patchInstallation(`[
				{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLANCrossSubnet"},
				{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"}]`)
			want := "Invalid Installation provided: IPv4 IPPool encapsulation VXLANCrossSubnet is not supported by Calico for Windows"
			Eventually(func(g Gomega) {
				for _, name := range []string{calicosim.StatusCalico, calicosim.StatusCalicoWindows} {
					c := condition(g, name, operatorv1.ComponentDegraded)
					g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), name)
					g.Expect(c.Reason).To(Equal(string(operatorv1.InvalidConfigurationError)), name)
					g.Expect(c.Message).To(Equal(want), name)
				}
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
		})

		It("keeps calico-windows Degraded while strictAffinity is false", func() {
			ipam := &calicov3.IPAMConfiguration{}
			Expect(k8s.Get(ctx, types.NamespacedName{Name: "default"}, ipam)).To(Succeed())
			ipam.Spec.StrictAffinity = false
			Expect(k8s.Update(ctx, ipam)).To(Succeed())
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"}]`)

			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusCalicoWindows, operatorv1.ComponentDegraded)
				g.Expect(c.Reason).To(Equal(string(operatorv1.ResourceReadError)))
				g.Expect(c.Message).To(HavePrefix("Invalid StrictAffinity, it must be set to 'true' when using Calico IPAM on Windows"))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())

			ipam.Spec.StrictAffinity = true
			Expect(k8s.Update(ctx, ipam)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(condition(g, calicosim.StatusCalicoWindows, operatorv1.ComponentAvailable).Status).To(Equal(operatorv1.ConditionTrue))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
		})
	})

	Context("while the Calico API server is unavailable", func() {
		var sim *calicosim.Simulator
		BeforeEach(func() {
			sim = startSimulator(calicosim.Options{CalicoAPI: calicosim.APIServerUnavailable})
			Expect(calicosim.Seed(ctx, k8s, calicosim.MainCluster())).To(Succeed())
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
		})

		It("refuses to modify pools until the API comes back", func() {
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/ipPools/0/encapsulation","value":"VXLAN"}]`)
			gen := installation().Generation
			Eventually(func(g Gomega) {
				c := condition(g, calicosim.StatusIPPools, operatorv1.ComponentDegraded)
				g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
				g.Expect(c.Reason).To(Equal(string(operatorv1.ResourceNotReady)))
				g.Expect(c.Message).To(Equal("Unable to modify IP pools while Calico API server is unavailable"))
				g.Expect(c.ObservedGeneration).To(Equal(gen))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			Expect(ipPool("default-ipv4-ippool").Spec.VXLANMode).To(Equal(calicov3.VXLANModeCrossSubnet))
			Eventually(func(g Gomega) operatorv1.ConditionStatus {
				return condition(g, calicosim.StatusAPIServer, operatorv1.ComponentAvailable).Status
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Equal(operatorv1.ConditionFalse))

			sim.SetCalicoAPI(calicosim.NativeV3)
			Eventually(func() calicov3.VXLANMode { return ipPool("default-ipv4-ippool").Spec.VXLANMode }).
				WithPolling(poll).WithTimeout(settleTimeout).Should(Equal(calicov3.VXLANModeAlways))
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
		})
	})

	Context("across a restart of the simulator", func() {
		It("carries on a rollout from the DaemonSet status", func() {
			stopFirst := startStoppableSimulator(calicosim.Options{RolloutStep: time.Hour})
			Expect(calicosim.Seed(ctx, k8s, calicosim.MainCluster())).To(Succeed())
			patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)
			// With hour-long steps the first simulator gets no further than the first node.
			Eventually(func(g Gomega) {
				ds := daemonSet("calico-node")
				g.Expect(ds.Status.ObservedGeneration).To(BeEquivalentTo(2))
				g.Expect(ds.Status.UpdatedNumberScheduled).To(BeEquivalentTo(0))
				g.Expect(ds.Status.NumberUnavailable).To(BeEquivalentTo(1))
			}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
			stopFirst()

			startSimulator(calicosim.Options{})
			Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
			Expect(daemonSet("calico-node").Status.UpdatedNumberScheduled).To(BeEquivalentTo(3))
		})
	})
})

func installation() *operatorv1.Installation {
	GinkgoHelper()
	inst := &operatorv1.Installation{}
	Expect(k8s.Get(ctx, types.NamespacedName{Name: "default"}, inst)).To(Succeed())
	return inst
}

func patchInstallation(jsonPatch string) {
	GinkgoHelper()
	inst := &operatorv1.Installation{}
	inst.Name = "default"
	Expect(k8s.Patch(ctx, inst, client.RawPatch(types.JSONPatchType, []byte(jsonPatch)))).To(Succeed())
}

func ipPool(name string) *calicov3.IPPool {
	GinkgoHelper()
	pool := &calicov3.IPPool{}
	Expect(k8s.Get(ctx, types.NamespacedName{Name: name}, pool)).To(Succeed())
	return pool
}

func daemonSet(name string) *appsv1.DaemonSet {
	GinkgoHelper()
	ds := &appsv1.DaemonSet{}
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: "calico-system", Name: name}, ds)).To(Succeed())
	return ds
}

// condition returns condition t of TigeraStatus name, or a zero condition when either is missing.
func condition(g Gomega, name string, t operatorv1.StatusConditionType) operatorv1.TigeraStatusCondition {
	ts := &operatorv1.TigeraStatus{}
	g.Expect(client.IgnoreNotFound(k8s.Get(ctx, types.NamespacedName{Name: name}, ts))).To(Succeed())
	for _, c := range ts.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return operatorv1.TigeraStatusCondition{}
}

func env(ds *appsv1.DaemonSet, name string) string {
	v, _ := calicosim.EnvValue(ds, name)
	return v
}

func ptr[T any](v T) *T { return &v }
