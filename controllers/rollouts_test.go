package controllers_test

import (
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("calico-node rollouts the migration forces", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	maxUnavailable := func() *intstr.IntOrString {
		return on.Installation().Spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable
	}
	stats := func() calicosim.RolloutStats { return sim.Rollouts(calico.SystemNamespace, calico.NodeDaemonSet) }

	It("rolls calico-node out faster with spec.rollout.maxUnavailable, and puts the Installation's value back", func() {
		seed(calicosim.MainClusterOf(8))
		sim.ResetRolloutStats()
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			// The pod network check is not this spec's subject: its rounds
			// between eight nodes after each step took the migration past
			// the suite's 30 s on a loaded two-core machine.
			wr.Spec.PodNetworkCheck.Disabled = true
		})
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Expect(stats()).To(And(HaveField("Rollouts", 1), HaveField("MostUnavailable", 2)), "one rollout, two nodes at a time")
		Expect(maxUnavailable()).To(HaveValue(Equal(intstr.FromInt32(1))), "the Tigera operator's default, put back")
		Expect(on.WR().Status.Originals.NodeMaxUnavailable).To(HaveValue(Equal(v1alpha1.OriginalValue{Present: true, Value: "1"})))

		By("rolling back as fast, and putting the value back again")
		sim.ResetRolloutStats()
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(stats()).To(And(HaveField("Rollouts", 1), HaveField("MostUnavailable", 2)))
		Expect(maxUnavailable()).To(HaveValue(Equal(intstr.FromInt32(1))))
	})

	It("shows the faster rollout and the value put back in a dry run's plan", func() {
		seed(calicosim.MainClusterOf(8))
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.DryRun = true
			wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		})
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePlanned))
		var speed []v1alpha1.PlannedChange
		for _, c := range on.WR().Status.Plan {
			if c.Field == "spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable" {
				speed = append(speed, c)
			}
		}
		Expect(speed).To(HaveExactElements(
			And(HaveField("Step", v1alpha1.StepBGP), HaveField("Before", "1"), HaveField("After", "25%")),
			And(HaveField("Step", v1alpha1.StepWindowsDataplane), HaveField("Before", "25%"), HaveField("After", "1"))))
		Expect(on.WR().Status.Canary).To(HaveValue(And(HaveField("State", v1alpha1.CanaryPlanned), HaveField("Size", int32(3)),
			HaveField("Steps", ConsistOf(v1alpha1.StepBGP)))), "the rollout begins with the default canary of three nodes")
		Expect(on.Condition(conditions.Ready)()).To(HaveField("Message", ContainSubstring("begins with a canary of 3 nodes")))
	})

	It("refuses a count above a quarter of the nodes before BGP is turned off, and goes on once it is lowered", func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(2)) })
		Eventually(on.Condition(conditions.Stalled)).Should(And(HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", conditions.ReasonMaxUnavailableTooHigh),
			HaveField("Message", ContainSubstring("spec.rollout.maxUnavailable 2 is more than a quarter of the 3 nodes calico-node runs on: at most 1"))))
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)), "nothing that rolls calico-node was changed")

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(1)) })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
	})

	It("leaves a maxUnavailable someone else set during the migration", func() {
		seed(calicosim.MainClusterOf(8))
		sim.HoldRollouts()
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			// With the rollouts held, a canary's nodes would never run the
			// new calico-node, and the spec's pace would never be written.
			wr.Spec.Rollout.Canary = ptr.To(intstr.FromInt32(0))
		})
		Eventually(maxUnavailable).Should(HaveValue(Equal(intstr.FromInt32(2))))

		inst := on.Installation()
		patch := client.MergeFrom(inst.DeepCopy())
		inst.Spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(3))
		Expect(k8s.Patch(ctx, inst, patch, client.FieldOwner("platform-team"))).To(Succeed())
		sim.ReleaseRollouts()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Expect(maxUnavailable()).To(HaveValue(Equal(intstr.FromInt32(3))))
	})
})
