package controllers_test

import (
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("The canary inside calico-node's rollout", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	stats := func() calicosim.RolloutStats { return sim.Rollouts(calico.SystemNamespace, calico.NodeDaemonSet) }
	canary := func() *v1alpha1.CanaryStatus { return on.WR().Status.Canary }
	// A rollout slow enough for the canary's check to end before it does:
	// eight nodes, two seconds each.
	const nodes, perNode = 8, 2 * time.Second
	state := func() v1alpha1.CanaryState { return ptr.Deref(canary(), v1alpha1.CanaryStatus{}).State }

	// migrateToCheck migrates eight nodes at maxUnavailable 2 with a canary
	// of two, and holds the rollout once the canary's check runs (as nodes
	// whose calico-node starts slowly would): the nodes it had not reached
	// are still there however long the check takes on a loaded machine.
	migrateToCheck := func() {
		seed(calicosim.MainClusterOf(nodes))
		sim.ResetRolloutStats()
		sim.SetRolloutStep(perNode)
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			wr.Spec.Rollout.Canary = ptr.To(intstr.FromInt32(2))
		})
		Eventually(state).WithTimeout(time.Minute).Should(Equal(v1alpha1.CanaryChecking))
		sim.HoldRollouts()
	}

	It("stops a rollout whose new calico-node breaks the pod network after the canary's nodes, and restores the originals", func() {
		sim.PodChecks().BreakUpdated(calicosim.UpdatedAny)
		migrateToCheck()
		Eventually(state).WithTimeout(time.Minute).Should(Equal(v1alpha1.CanaryFailed))
		st := stats()
		Expect(st.MostUnavailable).To(Equal(1), "the canary rolled one node at a time")
		Expect(len(st.PerNode)).To(BeNumerically("<", nodes), "the rollout stopped before every node ran the new calico-node")
		// The revert rolls the canary's nodes back at the spec's pace, as a
		// rollback does; it need not be slow here.
		sim.SetRolloutStep(0)
		sim.ReleaseRollouts()
		Eventually(on.Condition(conditions.Stalled)).WithTimeout(time.Minute).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", conditions.ReasonCanaryFailed),
			HaveField("Message", And(ContainSubstring("steps BGP, ServicesEndpoint, ServiceCIDRs, WindowsDataplane were reverted"),
				ContainSubstring("calico-node rolled back on the canary's nodes")))))

		c := canary()
		Expect(c.Nodes).To(HaveLen(2), "the canary's nodes are named")
		Expect(c.Reverted).To(BeTrue())
		Expect(c.Round.Failing).NotTo(BeEmpty(), "the failing pairs are in the status")
		Expect(c.Round.Failing).To(HaveEach(Or(
			HaveField("From", BeElementOf(c.Nodes)), HaveField("To", BeElementOf(c.Nodes)))), "every failing pair has a canary node")

		inst := on.Installation()
		Expect(inst.Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)), "BGP is on again")
		Expect(calico.WindowsDataplane(inst)).NotTo(HaveValue(Equal("HNS")), "the Windows dataplane is off again")
		Expect(inst.Spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))),
			"the Installation's pace is put back")
	})

	It("lets a healthy rollout finish at spec.rollout.maxUnavailable once the canary's nodes pass", func() {
		migrateToCheck()
		Eventually(state).WithTimeout(time.Minute).Should(Equal(v1alpha1.CanaryPassed))
		sim.ReleaseRollouts()
		Eventually(on.Phase).WithTimeout(time.Minute).Should(Equal(v1alpha1.PhaseReady))
		c := canary()
		Expect(c.State).To(Equal(v1alpha1.CanaryPassed))
		Expect(c.Nodes).To(HaveLen(2))
		Expect(c.Round.Failing).To(BeEmpty())
		st := stats()
		Expect(st.Rollouts).To(Equal(1), "one rollout")
		Expect(st.MostUnavailable).To(Equal(2), "the rollout went on at the spec's pace after the canary")
		Expect(st.PerNode).To(HaveLen(nodes))
		Expect(st.PerNode).To(HaveEach(1), "each node's calico-node was replaced once")
	})

	It("gives the rollback's rollout the same canary", func() {
		seed(calicosim.MainClusterOf(nodes))
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			wr.Spec.Rollout.Canary = ptr.To(intstr.FromInt32(2))
		})
		Eventually(on.Phase).WithTimeout(time.Minute).Should(Equal(v1alpha1.PhaseReady))
		sim.ResetRolloutStats()
		sim.SetRolloutStep(perNode / 2)
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).WithTimeout(time.Minute).Should(Equal(v1alpha1.PhaseRolledBack))
		c := canary()
		Expect(c).To(HaveValue(And(HaveField("Direction", v1alpha1.DirectionRollback), HaveField("State", v1alpha1.CanaryPassed),
			HaveField("Nodes", HaveLen(2)))))
		Expect(stats()).To(HaveField("Rollouts", 1), "one rollout")
	})

	It("has no canary with spec.rollout.canary 0", func() {
		seed(calicosim.MainClusterOf(4))
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.Canary = ptr.To(intstr.FromInt32(0)) })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Expect(canary()).To(BeNil())
	})
})
