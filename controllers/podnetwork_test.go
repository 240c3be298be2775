package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("Proving the pod network after each disruptive step", func() {
	var op *operator

	AfterEach(func() {
		sim.PodChecks().Reset()
		resetCluster(op)
	})

	// migrateUntilEncapsulationApproved takes the migration to its first
	// disruptive step with the baseline passed, breaks TCP in the pod
	// network, then lets Encapsulation go.
	migrateUntilEncapsulationApproved := func(onFailure v1alpha1.PodCheckFailureAction) {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		createWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.RequireApproval = true
			wr.Spec.PodNetworkCheck.OnFailure = onFailure
		})
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseAwaitingApproval))
		Expect(getWR().Status.PodNetworkCheck.Baseline).NotTo(BeNil(), "the baseline ran before the first change")
		sim.PodChecks().Break(calicosim.FaultTCP)
		updateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation, v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint}
		})
	}

	It("stops after Encapsulation with the checksum offload diagnosis when TCP breaks and ICMP passes", func() {
		migrateUntilEncapsulationApproved(v1alpha1.PodCheckStop)
		Eventually(condition(conditions.Stalled)).Should(haveStatus(metav1.ConditionTrue, conditions.ReasonPodNetworkCheckFailed))
		Expect(getWR().Status.Message).To(And(ContainSubstring("checksum offload"), ContainSubstring("ChecksumOffloadBroken=true")))
		Expect(installation().Spec.CalicoNetwork.IPPools[0].Encapsulation).To(Equal(operatorv1.EncapsulationVXLAN))
		Expect(installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)), "no further step ran")
	})

	It("reverts Encapsulation and stops when asked to revert", func() {
		migrateUntilEncapsulationApproved(v1alpha1.PodCheckRevert)
		Eventually(condition(conditions.Stalled)).Should(haveStatus(metav1.ConditionTrue, conditions.ReasonPodNetworkCheckFailed))
		Expect(getWR().Status.Message).To(And(ContainSubstring("was reverted"), ContainSubstring("checksum offload")))
		Expect(installation().Spec.CalicoNetwork.IPPools[0].Encapsulation).To(Equal(operatorv1.EncapsulationVXLANCrossSubnet))
		Expect(installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)))
	})
})
