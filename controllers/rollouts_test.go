package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("calico-node rollouts the migration forces", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	rollouts := func() int {
		return sim.Rollouts(calico.SystemNamespace, calico.NodeDaemonSet).Rollouts
	}

	It("rolls calico-node out once for BGP off and the services endpoint together", func() {
		seed(calicosim.MainCluster())
		before := rollouts()
		op = startOperator(nil, nil)
		createWR()
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		Expect(rollouts() - before).To(Equal(1))
		Expect(stepOf(v1alpha1.StepServicesEndpoint)().Changed).To(BeTrue())

		By("rolling back the same way")
		before = rollouts()
		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(rollouts()-before).To(Equal(1), "the old address handed over with BGP on; deleting the ConfigMap then renders nothing new")
	})

	It("rolls calico-node out once per change in the conservative mode", func() {
		seed(calicosim.MainCluster())
		before := rollouts()
		op = startOperator(nil, nil)
		createWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.Conservative = true })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		Expect(rollouts() - before).To(Equal(2))
	})
})
