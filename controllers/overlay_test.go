package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

// overlay reads Installation overlay; nil when there is none.
func overlay() *operatorv1.Installation {
	o := &operatorv1.Installation{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: calico.OverlayName}, o); err != nil {
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		return nil
	}
	return o
}

// patchOverlay merge-patches Installation overlay, creating it when absent,
// as field manager "platform-gitops".
func patchOverlay(patch string) {
	gitops := client.WithFieldOwner(k8s, "platform-gitops")
	if overlay() == nil {
		Expect(gitops.Create(ctx, &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.OverlayName}})).To(Succeed())
	}
	o := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.OverlayName}}
	Expect(gitops.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// effective is the Installation as the Tigera operator renders it: the
// overlay merged over default.
func effective() operatorv1.InstallationSpec {
	spec := on.Installation().Spec
	if o := overlay(); o != nil {
		spec = calico.MergeOverlay(spec, o.Spec)
	}
	return spec
}

// effectiveTouched is every Installation field a migration may change, as
// the Tigera operator renders it.
func effectiveTouched() look.Touched {
	spec := effective()
	return look.Touched{Pools: spec.CalicoNetwork.IPPools, BGP: spec.CalicoNetwork.BGP,
		WindowsDataplane: spec.CalicoNetwork.WindowsDataplane, WindowsNodes: spec.WindowsNodes, ServiceCIDRs: spec.ServiceCIDRs}
}

func quick(wr *v1alpha1.WindowsReadiness) {
	wr.Spec.Preflight.SkipNetworkProbe = true
	wr.Spec.PodNetworkCheck.Disabled = true
}

var _ = Describe("An overlay Installation written or changed mid-migration", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	stalledMessage := func() string {
		c := on.Condition(conditions.Stalled)()
		if c.Status != metav1.ConditionTrue || c.Reason != conditions.ReasonConflictingManager {
			return ""
		}
		return c.Message
	}

	DescribeTable("is named, with its field and who wrote it, when it puts back a value winready set, and the migration goes on once it is removed",
		func(atStart bool, patch, named, fix string) {
			cl := calicosim.MainCluster()
			if atStart {
				// Fields the migration does not change: the preflight passes.
				cl.Overlay = &operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{MTU: ptr.To[int32](1400)}}
			}
			seed(cl)
			op = startOperator(nil, nil)
			on.CreateWR(quick)
			Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
			before := on.Installation().Spec

			patchOverlay(patch)
			Eventually(stalledMessage).Should(And(
				ContainSubstring(`Installation overlay (field manager "platform-gitops") `+named),
				ContainSubstring("the Tigera operator merges the overlay over Installation default"),
				ContainSubstring("winready never changes the overlay"),
				ContainSubstring(`kubectl patch installation overlay --type merge -p '`+fix+`'`)),
				"the condition names the overlay, its field and the fix")
			Expect(on.Condition(conditions.Ready)().Status).To(Equal(metav1.ConditionFalse), "the cluster no longer runs what Ready promised")
			Expect(on.Installation().Spec).To(Equal(before), "default already holds winready's values: nothing to write")

			patchOverlay(fix)
			Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), "once the overlay no longer overrides it")
			if atStart {
				Expect(overlay().Spec.CalicoNetwork.MTU).To(HaveValue(BeEquivalentTo(1400)), "the overlay is never written by winready")
			}
		},
		Entry("bgp Enabled in an overlay created after Ready", false,
			`{"spec":{"calicoNetwork":{"bgp":"Enabled"}}}`, "sets spec.calicoNetwork.bgp: Enabled",
			`{"spec":{"calicoNetwork":{"bgp":null}}}`),
		Entry("CrossSubnet pools added to an overlay that was there from the start", true,
			`{"spec":{"calicoNetwork":{"ipPools":[{"name":"default-ipv4-ippool","cidr":"172.20.0.0/16","encapsulation":"VXLANCrossSubnet"}]}}}`,
			"sets spec.calicoNetwork.ipPools: [default-ipv4-ippool 172.20.0.0/16 encapsulation VXLANCrossSubnet]",
			`{"spec":{"calicoNetwork":{"ipPools":null}}}`),
		Entry("other serviceCIDRs", true, `{"spec":{"serviceCIDRs":["10.100.0.0/16"]}}`, "sets spec.serviceCIDRs: [10.100.0.0/16]",
			`{"spec":{"serviceCIDRs":null}}`),
		Entry("the Windows dataplane off", false, `{"spec":{"calicoNetwork":{"windowsDataplane":"Disabled"}}}`,
			"sets spec.calicoNetwork.windowsDataplane: Disabled", `{"spec":{"calicoNetwork":{"windowsDataplane":null}}}`),
	)

	It("is named while calico-node rolls out at its pace instead of spec.rollout.maxUnavailable", func() {
		seed(calicosim.MainClusterOf(8))
		sim.HoldRollouts()
		op = startOperator(nil, nil)
		on.CreateWR(quick, func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(2)) })
		Eventually(func() *intstr.IntOrString {
			return on.Installation().Spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable
		}).
			Should(HaveValue(Equal(intstr.FromInt32(2))), "winready sped the BGP rollout up")

		patchOverlay(`{"spec":{"nodeUpdateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}}}}`)
		Eventually(func() string { return on.Condition(conditions.Reconciling)().Message }).Should(And(
			ContainSubstring("(BGP): waiting for"),
			ContainSubstring(`Installation overlay sets spec.nodeUpdateStrategy: {"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}}, `+
				`which replaces Installation default's: calico-node rolls out with maxUnavailable 1, not 2 from spec.rollout.maxUnavailable`)))

		sim.ReleaseRollouts()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), "the overlay's pace is someone else's, and left alone")
		Expect(overlay().Spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
		Expect(on.Installation().Spec.NodeUpdateStrategy.Type).To(Equal(appsv1.RollingUpdateDaemonSetStrategyType))
	})
})

var _ = Describe("Rolling back with an overlay Installation", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	It("restores the effective Installation the cluster had, and names an overlay field added since instead of reporting RolledBack", func() {
		cl := calicosim.MainCluster()
		cl.Overlay = &operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{MTU: ptr.To[int32](1400)}}
		seed(cl)
		original := effectiveTouched()
		op = startOperator(nil, nil)
		on.CreateWR(quick)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Expect(on.WR().Status.Originals.Overlay).To(Equal(&v1alpha1.OriginalOverlay{Present: true}),
			"an overlay of fields the migration does not change, recorded")

		By("adding the service network winready wrote to the overlay: no conflict for the migration")
		cidrs := on.Installation().Spec.ServiceCIDRs
		Expect(cidrs).NotTo(BeEmpty())
		patchOverlay(`{"spec":{"serviceCIDRs":["` + cidrs[0] + `"]}}`)
		Consistently(on.Phase).Should(Equal(v1alpha1.PhaseReady))

		By("rolling back")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(func() metav1.Condition { return on.Condition(conditions.Stalled)() }).Should(And(
			look.HaveStatus(metav1.ConditionTrue, conditions.ReasonConflictingManager),
			HaveField("Message", ContainSubstring(`(ServiceCIDRs): Installation overlay (field manager "platform-gitops") sets spec.serviceCIDRs: [`+cidrs[0]+`]`)),
			HaveField("Message", ContainSubstring(`so the cluster runs spec.serviceCIDRs [`+cidrs[0]+`], not <absent> as before the migration`)),
			HaveField("Message", ContainSubstring(`kubectl patch installation overlay --type merge -p '{"spec":{"serviceCIDRs":null}}'`))),
			"the rollback names the overlay rather than report RolledBack")
		Expect(on.Installation().Spec.ServiceCIDRs).To(BeNil(), "default is restored")
		Expect(on.Phase()).NotTo(Equal(v1alpha1.PhaseRolledBack))

		patchOverlay(`{"spec":{"serviceCIDRs":null}}`)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(effectiveTouched()).To(Equal(original), "the effective Installation is the one the cluster had")
		Expect(overlay().Spec.CalicoNetwork.MTU).To(HaveValue(BeEquivalentTo(1400)), "the overlay's own fields stay, untouched")
	})
})
