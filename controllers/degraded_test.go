package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("Calico Degraded after winready's own change", func() {
	var op *operator

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
	})

	AfterEach(func() { resetCluster(op) })

	// degradedDuring makes Calico Degraded while step waits for its held
	// rollout, as a change calico-node cannot run with would, and waits
	// until winready sees it.
	degradedDuring := func(step v1alpha1.StepName) {
		Eventually(func() string { return stepOf(step)().Message }).Should(ContainSubstring("calico-node rollout"))
		sim.InjectFault("calico-node crash looping on linux-2")
		Eventually(condition(conditions.CalicoHealthy)).Should(haveStatus(metav1.ConditionFalse, conditions.ReasonCalicoDegraded))
	}

	It("lets a rollback undo the change while Calico stays Degraded", func() {
		sim.HoldRollouts()
		createWR()
		degradedDuring(v1alpha1.StepBGP)
		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })

		Eventually(func() *operatorv1.BGPOption { return installation().Spec.CalicoNetwork.BGP }).
			Should(HaveValue(Equal(operatorv1.BGPEnabled)), "the rollback of BGP goes ahead although Calico is Degraded")
		Eventually(func() string { return condition(conditions.CalicoHealthy)().Message }).Should(ContainSubstring("the rollback goes on to undo it"))

		sim.ClearFault()
		sim.ReleaseRollouts()
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseRolledBack))
	})

	It("re-runs that step toward a corrected target, and nothing else", func() {
		createWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.99", Port: 6443}
			wr.Spec.RequireApproval = true
			wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation, v1alpha1.StepBGP}
		})
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseAwaitingApproval))
		sim.HoldRollouts()
		updateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = append(wr.Spec.ApprovedSteps, v1alpha1.StepServicesEndpoint)
		})
		degradedDuring(v1alpha1.StepServicesEndpoint)
		updateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.10", Port: 6443}
		})
		Eventually(func() string { return servicesEndpoint().Data[calico.ServiceHostKey] }).Should(Equal("10.0.0.10"),
			"the step that made Calico Degraded runs again with the corrected address")
		Eventually(func() string { return condition(conditions.CalicoHealthy)().Message }).Should(ContainSubstring("re-running it toward the corrected target"))
		Expect(stepOf(v1alpha1.StepServiceCIDRs)().Changed).To(BeTrue(), "written in the same write as the services endpoint")

		sim.ClearFault()
		sim.ReleaseRollouts()
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
	})

	It("stalls with the TigeraStatus message once Degraded outlasts the step deadline", func() {
		sim.InjectFault("calico-node crash looping on linux-2")
		Eventually(func() bool {
			h, _ := calico.ReadHealth(ctx, k8s, calico.StatusCalico)
			return h.Degraded
		}).Should(BeTrue())
		createWR()
		Eventually(condition(conditions.CalicoHealthy)).Should(haveStatus(metav1.ConditionFalse, conditions.ReasonCalicoDegraded))
		Expect(condition(conditions.Stalled)().Status).NotTo(Equal(metav1.ConditionTrue), "Calico may recover by itself")

		op.clock.Step(31 * time.Minute)
		poke("test/poke", "1")
		Eventually(condition(conditions.Stalled)).Should(haveStatus(metav1.ConditionTrue, conditions.ReasonStepTimeout))
		Expect(getWR().Status.Message).To(And(ContainSubstring("crash looping on linux-2"), ContainSubstring("longer than the step deadline")))
	})
})
