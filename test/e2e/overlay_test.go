package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
)

var _ = Describe("An overlay Installation written after Ready", Ordered, func() {
	overlay := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.OverlayName}}

	BeforeAll(func() {
		Expect(calicoBackend.Seed(ctx, k8s, mainCluster())).To(Succeed())
	})

	AfterAll(func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, overlay))).To(Succeed())
		leaveAsFound()
	})

	stalled := func() string {
		for _, c := range on.WR().Status.Conditions {
			if c.Type == conditions.Stalled && c.Status == metav1.ConditionTrue && c.Reason == conditions.ReasonConflictingManager {
				return c.Message
			}
		}
		return ""
	}

	It("is named when the Tigera operator runs calico-node with BIRD again because of it, and the migration is Ready again once it is gone", func() {
		createPausedWR()
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), why)

		gitops := client.WithFieldOwner(k8s, "platform-gitops")
		Expect(gitops.Create(ctx, overlay)).To(Succeed())
		Expect(gitops.Patch(ctx, overlay, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"calicoNetwork":{"bgp":"Enabled"}}}`)))).To(Succeed())
		Eventually(func() string { return daemonSetEnv(calico.NodeDaemonSet, calico.NetworkingBackendEnv) }).
			ShouldNot(Equal(calico.BackendVXLAN), "the Tigera operator merges the overlay over default: BIRD again")
		Eventually(stalled).Should(And(
			ContainSubstring(`Installation overlay (field manager "platform-gitops") sets spec.calicoNetwork.bgp: Enabled`),
			ContainSubstring(`kubectl patch installation overlay --type merge -p '{"spec":{"calicoNetwork":{"bgp":null}}}'`)), why)
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)), "default holds winready's value")

		Expect(k8s.Delete(ctx, overlay)).To(Succeed())
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), why)
		Eventually(func() string { return daemonSetEnv(calico.NodeDaemonSet, calico.NetworkingBackendEnv) }).
			Should(Equal(calico.BackendVXLAN), why)
	})
})
