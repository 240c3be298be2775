package passes_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

// What a migration writes, given the cluster it starts from.
var _ = Describe("Migrating clusters of every starting point", func() {
	It("skips every step the cluster already holds", func() {
		cl := calicosim.MainCluster()
		cl.StrictAffinity = ptr.To(true)
		cl.Pools[0].Encapsulation = operatorv1.EncapsulationVXLAN
		cl.BGP = operatorv1.BGPDisabled
		b := driveInline(cl)
		b.on.CreateWR()

		reconcileUntil(b, b.on.Condition(conditions.Ready), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonMigrated))
		for _, name := range []v1alpha1.StepName{v1alpha1.StepStrictAffinity, v1alpha1.StepEncapsulation, v1alpha1.StepBGP} {
			Expect(b.on.Step(name)()).To(And(HaveField("State", v1alpha1.StepCompleted), HaveField("Changed", false)), string(name))
		}
		for _, name := range []v1alpha1.StepName{v1alpha1.StepServicesEndpoint, v1alpha1.StepServiceCIDRs, v1alpha1.StepWindowsDataplane} {
			Expect(b.on.Step(name)()).To(HaveField("Changed", true), string(name))
		}
		Expect(look.CalicoWrites(b.r.Writes.Snapshot())).To(Equal(map[string]int{"Installation patch": 2, "ConfigMap tigera-operator create": 1,
			"DaemonSet calico-system patch": 2}), "steps 4 to 6 in one write under the hold, and the hold's end")
	})

	It("creates the IPAM configuration when the cluster has none, and records that it was absent", func() {
		cl := calicosim.MainCluster()
		cl.StrictAffinity = nil
		b := driveInline(cl)
		b.on.CreateWR()

		reconcileUntil(b, b.on.Condition(conditions.Ready), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonMigrated))
		cfg := b.on.IPAMConfig()
		Expect(cfg).NotTo(BeNil())
		Expect(cfg.Spec.StrictAffinity).To(BeTrue())
		Expect(cfg.Spec.AutoAllocateBlocks).To(BeTrue())
		Expect(b.on.WR().Status.Originals.IPAMConfig.Present).To(BeFalse())
	})

	It("changes every IPv4 cross-subnet pool and leaves the others alone", func() {
		cl := calicosim.MainCluster()
		cl.Pools = append(cl.Pools,
			operatorv1.IPPool{Name: "second", CIDR: "172.21.0.0/16", Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet,
				BlockSize: ptr.To[int32](26), NATOutgoing: operatorv1.NATOutgoingEnabled},
			operatorv1.IPPool{Name: "already-vxlan", CIDR: "172.22.0.0/16", Encapsulation: operatorv1.EncapsulationVXLAN,
				BlockSize: ptr.To[int32](26), NATOutgoing: operatorv1.NATOutgoingEnabled},
			// Turning BGP off needs every pool encapsulated, IPv6 ones included.
			operatorv1.IPPool{Name: "ipv6", CIDR: "fd00:10::/48", Encapsulation: operatorv1.EncapsulationVXLAN,
				BlockSize: ptr.To[int32](122), NATOutgoing: operatorv1.NATOutgoingDisabled},
		)
		b := driveInline(cl)
		b.on.CreateWR()

		reconcileUntil(b, b.on.Condition(conditions.Ready), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonMigrated))
		encaps := map[string]operatorv1.EncapsulationType{}
		for _, p := range b.on.Installation().Spec.CalicoNetwork.IPPools {
			encaps[p.Name] = p.Encapsulation
		}
		Expect(encaps).To(Equal(map[string]operatorv1.EncapsulationType{
			"default-ipv4-ippool": operatorv1.EncapsulationVXLAN,
			"second":              operatorv1.EncapsulationVXLAN,
			"already-vxlan":       operatorv1.EncapsulationVXLAN,
			"ipv6":                operatorv1.EncapsulationVXLAN,
		}))
		Expect(b.on.IPPool("second").Spec.VXLANMode).To(BeEquivalentTo("Always"))
		Expect(b.on.Condition(conditions.PreflightPassed)()).To(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonChecksPassedWithWarnings),
			"an IPv6 pool is a warning: Windows pods get IPv4 only")
		Expect(look.CalicoWrites(b.r.Writes.Snapshot())).To(HaveKeyWithValue("Installation patch", 3), "both pools change in one patch")
	})

	It("refuses an IPIP cluster in preflight and changes nothing", func() {
		cl := calicosim.MainCluster()
		cl.Pools[0].Encapsulation = operatorv1.EncapsulationIPIP
		b := driveInline(cl)
		b.on.CreateWR()

		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonPreflightFailed))
		b.rest(time.Hour)
		Expect(b.on.Condition(conditions.PreflightPassed)().Message).To(ContainSubstring("IP-in-IP"))
		Expect(b.on.Phase()).To(Equal(v1alpha1.PhaseStalled))
		Expect(b.on.WR().Status.Originals).To(BeNil())
		Expect(look.CalicoWrites(b.r.Writes.Snapshot())).To(BeEmpty(), "winready wrote nothing to Calico")
	})

	It("keeps why an agent could not probe in the status on every pass after its round, its report gone", func() {
		b := driveInline(calicosim.MainCluster())
		b.agents.Late("linux-2", time.Minute)
		b.on.CreateWR()
		const why = "1 nodes did not report (linux-2 (the agent came up 1m0s after its round began"

		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonNetworkProbeFailed))
		Expect(b.on.WR().Status.Message).To(ContainSubstring(why), "as the round is summed up")
		passes := b.passes
		b.rest(time.Minute) // within the preflight's retry: no new round
		Expect(b.passes).To(BeNumerically(">", passes), "the round's clean-up wakes a pass")
		Expect(b.on.WR().Status.Message).To(ContainSubstring(why), "on the passes after")
		Expect(b.on.Condition(conditions.PreflightPassed)().Message).To(ContainSubstring(why))
		Expect(b.on.WR().Status.Preflight.Probe.MissingReasons).To(ConsistOf(HaveField("Node", "linux-2")))
	})

	It("skips the network probe when the spec says so, and records the warning", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.SkipNetworkProbe = true
			// The pod network check's rounds run in the same namespace.
			wr.Spec.PodNetworkCheck.Disabled = true
		})
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.WR().Status.Preflight.Probe.Skipped).To(BeTrue())
		Expect(b.on.Condition(conditions.PreflightPassed)()).To(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonChecksPassedWithWarnings))
		Expect(b.on.Condition(conditions.PreflightPassed)().Message).To(ContainSubstring("NetworkProbe: skipped"))
		Expect(b.r.Writes.Snapshot()).NotTo(HaveKey("DaemonSet "+probeNamespace+" create"), "no agents were started")
	})

	It("uses the API server address and service network from the spec", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "api.example.com", Port: 8443}
			wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{"10.128.0.0/16"}
		})
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.ServicesEndpoint().Data).To(Equal(map[string]string{calico.ServiceHostKey: "api.example.com", calico.ServicePortKey: "8443"}))
		Expect(b.on.Installation().Spec.ServiceCIDRs).To(Equal([]string{"10.128.0.0/16"}))
		Expect(b.on.Condition(conditions.DirectAPIServerAddress)()).To(look.HaveStatus(metav1.ConditionFalse, conditions.ReasonHostname),
			"a DNS name is allowed but warned about")
	})

	It("says so when it records originals from a cluster that already looks migrated", func() {
		cl := calicosim.MainCluster()
		cl.BGP = operatorv1.BGPDisabled
		b := driveInline(cl)
		b.on.CreateWR()
		reconcileUntil(b, b.on.Condition(conditions.OriginalsRecorded), And(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonRecorded),
			HaveField("Message", ContainSubstring("already held spec.calicoNetwork.bgp Disabled"))))
	})

	It("re-runs a finished step toward each new value of the spec and blames no field manager", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		for _, cidr := range []v1alpha1.IPv4CIDR{"10.96.0.0/16", "10.97.0.0/16", "10.98.0.0/16"} {
			b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.ServiceCIDRs = []v1alpha1.IPv4CIDR{cidr} })
			reconcileUntil(b, func() []string { return b.on.Installation().Spec.ServiceCIDRs }, Equal([]string{string(cidr)}))
			reconcileUntil(b, func() bool {
				wr := b.on.WR()
				return wr.Status.Phase == v1alpha1.PhaseReady && wr.Status.ObservedGeneration == wr.Generation
			}, BeTrue())
		}
		Expect(b.on.Step(v1alpha1.StepServiceCIDRs)().Reverts).To(BeZero(), "a spec edit is not another manager's revert")
		Expect(b.on.Condition(conditions.Stalled)().Status).NotTo(Equal(metav1.ConditionTrue))
	})

	It("computes the full plan in a dry run and changes nothing, then applies it when the dry run is switched off", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = true })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhasePlanned))
		var lines []string
		for _, c := range b.on.WR().Status.Plan {
			lines = append(lines, fmt.Sprintf("%s %s %s: %s -> %s", c.Step, c.Object, c.Field, c.Before, c.After))
		}
		Expect(lines).To(Equal([]string{
			"StrictAffinity IPAMConfiguration default spec.strictAffinity: false -> true",
			"Encapsulation Installation default spec.calicoNetwork.ipPools[name=default-ipv4-ippool].encapsulation: VXLANCrossSubnet -> VXLAN",
			"BGP Installation default spec.calicoNetwork.bgp: Enabled -> Disabled",
			"ServicesEndpoint ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_HOST: <absent> -> 10.0.0.10",
			"ServicesEndpoint ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_PORT: <absent> -> 6443",
			"ServiceCIDRs Installation default spec.serviceCIDRs: <absent> -> [" + strings.Join(b.on.ServiceCIDRs(), ", ") + "]",
			"WindowsDataplane Installation default spec.calicoNetwork.windowsDataplane: Disabled -> HNS",
		}))
		Expect(b.on.WR().Status.Originals).To(BeNil())
		b.rest(time.Hour)
		Expect(b.r.Writes.Snapshot()).To(SatisfyAll(
			Not(HaveKey("Installation patch")), Not(HaveKey("IPAMConfiguration patch")),
			Not(HaveKey("DaemonSet "+probeNamespace+" create"))), "no change, no probe agents")

		By("applying it when the dry run is switched off")
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = false })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.WR().Status.Plan).To(BeNil())
		Expect(b.r.Writes.Snapshot()).To(HaveKey("DaemonSet "+probeNamespace+" create"), "the probe and pod checks ran once it was no dry run")
	})
})
