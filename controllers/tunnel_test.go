package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

var _ = Describe("Turning BGP off only once every node has a VXLAN tunnel address", func() {
	var op *operator

	AfterEach(func() {
		sim.ReleaseTunnels()
		resetCluster(op)
	})

	It("waits for a node without one, stalls naming it, and goes on once it has one", func() {
		sim.WithholdTunnel("linux-1")
		cl := calicosim.MainCluster()
		cl.Nodes[1].WithoutTunnel = true
		Expect(cl.Nodes[1].Name).To(Equal("linux-1"))
		seed(cl)
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.PhaseTimeout = &metav1.Duration{Duration: time.Minute} })

		Eventually(func() string { return on.Step(v1alpha1.StepBGP)().Message }).Should(And(
			ContainSubstring("VXLAN tunnel address"), ContainSubstring("1 have none: linux-1.")))
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)), "BIRD still runs")

		op.clock.Step(2 * time.Minute)
		poke("test/poke", "tunnel")
		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonStepTimeout))
		Expect(on.WR().Status.Message).To(And(ContainSubstring("step 3/6 (BGP)"), ContainSubstring("linux-1")))
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)))

		sim.ReleaseTunnels()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
	})
})
