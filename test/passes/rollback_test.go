package passes_test

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/record"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

// What a rollback restores, from wherever the migration stood.
var _ = Describe("Rolling back pass by pass", func() {
	var (
		b        *inlineBed
		original look.Touched
	)

	BeforeEach(func() {
		b = driveInline(calicosim.MainCluster())
		original = b.on.Touched()
	})

	rollback := func() {
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
	}

	It("restores every touched field after a full migration, and migrating again works", func() {
		b.on.CreateWR()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.Touched()).NotTo(Equal(original))

		rollback()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
		Expect(b.on.Condition(conditions.Ready)()).To(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonRolledBack))
		Expect(b.on.Touched()).To(Equal(original), "every field as it was found")
		for _, s := range b.on.WR().Status.Steps {
			Expect(s.State).To(Equal(v1alpha1.StepReverted), string(s.Name))
		}
		Expect(b.on.WR().Status.Originals).To(BeNil(), "a later migration records the originals afresh")
		Expect(b.on.Installation().Spec.CalicoNetwork.HostPorts).NotTo(BeNil(), "the Tigera operator's own defaults are left alone")

		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionMigrate })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)))
	})

	DescribeTable("restores every touched field from a migration stopped right after a step",
		func(after v1alpha1.StepName) {
			b.on.CreateWR()
			reconcileUntil(b, func() v1alpha1.StepState { return b.on.Step(after)().State }, Equal(v1alpha1.StepCompleted))
			rollback()
			reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
			Expect(b.on.Touched()).To(Equal(original))
		},
		Entry("after StrictAffinity", v1alpha1.StepStrictAffinity),
		Entry("after Encapsulation", v1alpha1.StepEncapsulation),
		Entry("after BGP", v1alpha1.StepBGP),
		Entry("after ServicesEndpoint", v1alpha1.StepServicesEndpoint),
		Entry("after ServiceCIDRs", v1alpha1.StepServiceCIDRs),
	)

	It("is refused while a Windows node exists, without writing anything, and goes on once it is gone", func() {
		b.on.CreateWR()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.k8s.Create(ctx, look.WindowsNode("win-1"))).To(Succeed())
		reconcileUntil(b, func() []string { return b.on.WR().Status.WindowsNodes }, Equal([]string{"win-1"}))
		before, writes := b.on.Touched(), look.CalicoWrites(b.r.Writes.Snapshot())

		rollback()
		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonWindowsNodesPresent))
		b.rest(time.Hour)
		Expect(b.on.Condition(conditions.RollbackAllowed)()).To(look.HaveStatus(metav1.ConditionFalse, conditions.ReasonWindowsNodesPresent))
		Expect(b.on.Condition(conditions.RollbackAllowed)().Message).To(ContainSubstring("win-1"))
		Expect(b.on.Phase()).To(Equal(v1alpha1.PhaseStalled))
		Expect(look.CalicoWrites(b.r.Writes.Snapshot())).To(Equal(writes), "no write to any Calico object or ConfigMap")
		Expect(b.on.Touched()).To(Equal(before))

		By("going on once the Windows node is gone")
		Expect(b.k8s.Delete(ctx, look.WindowsNode("win-1"))).To(Succeed())
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
		Expect(b.on.Touched()).To(Equal(original))
	})

	It("stops between two steps when a Windows node joins during the rollback", func() {
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.WindowsNodeGate = v1alpha1.GateDisabled })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		rollback()
		reconcileUntil(b, func() v1alpha1.StepState { return b.on.Step(v1alpha1.StepWindowsDataplane)().State }, Equal(v1alpha1.StepReverting))
		Expect(b.k8s.Create(ctx, look.WindowsNode("win-1"))).To(Succeed())

		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonWindowsNodesPresent))
		Expect(b.on.Message()).To(ContainSubstring("set spec.direction: Migrate"))
		reconcileUntil(b, func() bool {
			_, held := calico.HeldSince(b.on.Installation())
			return held
		}, BeFalse(), "the changes written before the node joined reach calico-node")
		writes := look.CalicoWrites(b.r.Writes.Snapshot())
		b.rest(time.Hour)
		Expect(look.CalicoWrites(b.r.Writes.Snapshot())).To(Equal(writes), "nothing more is changed")
		for _, s := range b.on.WR().Status.Steps {
			Expect(s.State).To(BeElementOf(v1alpha1.StepCompleted, v1alpha1.StepReverting, v1alpha1.StepReverted), string(s.Name))
		}

		By("finishing the migration again when asked to")
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionMigrate })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
	})

	It("stops a migration midway with a dry run and shows what is left", func() {
		b.sim.HoldRollouts()
		// One change per step, so that steps are left after BGP.
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.Conservative = true })
		reconcileUntil(b, func() string { return b.on.Step(v1alpha1.StepBGP)().Message }, ContainSubstring("calico-node rollout"))
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = true })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhasePlanned))
		b.sim.ReleaseRollouts()
		b.rest(time.Hour)
		Expect(b.on.Installation().Spec.ServiceCIDRs).To(BeNil(), "no further step runs")
		Expect(b.on.WR().Status.Plan).To(ContainElement(HaveField("Step", v1alpha1.StepServiceCIDRs)))

		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = false })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
	})

	It("shows the reverse plan of a rollback in a dry run and changes nothing", func() {
		b.on.CreateWR()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		migrated := b.on.Touched()
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.DryRun = true
			wr.Spec.Direction = v1alpha1.DirectionRollback
		})
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhasePlanned))
		Expect(b.on.WR().Status.Plan).To(ContainElement(And(HaveField("Step", v1alpha1.StepBGP),
			HaveField("Before", "Disabled"), HaveField("After", "Enabled"))))
		b.rest(time.Hour)
		Expect(b.on.Touched()).To(Equal(migrated))

		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = false })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
	})

	It("rolls back to the originals when the WindowsReadiness was deleted after Ready and applied again", func() {
		b.on.CreateWR()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.originalsRecord()).NotTo(BeNil(), "written before the first change")

		deleteWR(b)
		Expect(b.originalsRecord()).NotTo(BeNil(), "deleting the WindowsReadiness leaves the record")
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonForeignRecord),
			"the new object did not write the record: nothing tells it from a planted one")
		Expect(b.on.Touched()).NotTo(Equal(original), "nothing is written back before a person acknowledges it")
		b.acknowledgeRecord()

		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
		Expect(b.on.Touched()).To(Equal(original), "every field as it was before the first migration")
		Expect(b.originalsRecord()).To(BeNil(), "removed after a finished rollback")
	})

	It("goes on from the record when the WindowsReadiness is deleted midway and applied again", func() {
		b.on.CreateWR()
		reconcileUntil(b, func() v1alpha1.StepState { return b.on.Step(v1alpha1.StepBGP)().State }, Equal(v1alpha1.StepCompleted))
		deleteWR(b)
		Expect(b.on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)), "the cluster is half migrated")

		b.on.CreateWR()
		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonForeignRecord))
		b.acknowledgeRecord()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.WR().Status.Originals.BGP).To(Equal(v1alpha1.OriginalValue{Present: true, Value: "Enabled"}),
			"the originals are the ones from before the first change, not the half-migrated values")
		Expect(b.on.Condition(conditions.OriginalsRecorded)()).To(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonRestoredFromRecord))

		rollback()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
		Expect(b.on.Touched()).To(Equal(original))
	})
})

// acknowledgeRecord accepts, as a person does, a record of the originals
// the WindowsReadiness did not write.
func (b *inlineBed) acknowledgeRecord() {
	GinkgoHelper()
	b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
		wr.Spec.Preflight.Acknowledge = append(wr.Spec.Preflight.Acknowledge, v1alpha1.AcknowledgeForeignRecord)
	})
}

// originalsRecord is the durable record of the originals; nil when absent.
func (b *inlineBed) originalsRecord() *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	err := b.k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: record.Name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return cm
}
