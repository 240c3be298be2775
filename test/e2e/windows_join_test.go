package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/windows"
)

// windowsBlock is the IPAM block calico-node-windows's startup claims on
// win-1 for its VXLAN tunnel address (strictAffinity: a block of its own).
// No calico-node-windows runs on a kwok node, so the test claims it; the
// simulator, which would claim one, leaves a node that has one alone.
func windowsBlock() *calicov3.IPAMBlock {
	return &calicov3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: "172-20-8-0-26"},
		Spec: calicov3.IPAMBlockSpec{CIDR: "172.20.8.0/26", Affinity: ptr.To("host:win-1"),
			Allocations: make([]*int, 64), Unallocated: []int{}, Attributes: []calicov3.AllocationAttribute{}}}
}

func joinOf(name string) func() v1alpha1.WindowsNodeJoin {
	return func() v1alpha1.WindowsNodeJoin {
		for _, j := range on.WR().Status.WindowsNodeJoins {
			if j.Name == name {
				return j
			}
		}
		return v1alpha1.WindowsNodeJoin{}
	}
}

var _ = Describe("The first Windows node joining a Windows-ready cluster", Ordered, func() {
	BeforeAll(func() {
		Expect(calicoBackend.Seed(ctx, k8s, mainCluster())).To(Succeed())
	})

	AfterAll(func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, windowsBlock()))).To(Succeed())
		leaveAsFound()
	})

	It("reports no Windows node once Ready", func() {
		wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
			Spec: v1alpha1.WindowsReadinessSpec{Preflight: v1alpha1.PreflightSpec{SkipNetworkProbe: skipProbe()},
				// No pod runs on kwok nodes: the pod network check needs real pods.
				PodNetworkCheck: v1alpha1.PodNetworkCheckSpec{Disabled: skipProbe()}}}
		Expect(k8s.Create(ctx, wr)).To(Succeed())
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), why)
		Eventually(func() string {
			if c := meta.FindStatusCondition(on.WR().Status.Conditions, windows.ConditionHealthy); c != nil {
				return c.Reason
			}
			return ""
		}).Should(Equal(windows.ReasonNoWindowsNodes), why)
	})

	It("reports the node's calico-node-windows pod Ready, its IPAM block and the node Ready", func() {
		Expect(k8s.Create(ctx, windowsBlock())).To(Succeed())
		Eventually(func() error { return k8s.Create(ctx, windowsNode()) }).Should(Succeed(), "a Ready cluster admits Windows nodes")
		Eventually(joinOf("win-1")).Should(And(
			HaveField("State", v1alpha1.JoinJoined), HaveField("Pod", HavePrefix("calico-node-windows-")),
			HaveField("PodPhase", "Running"), HaveField("PodReady", true), HaveField("Block", "172.20.8.0/26"),
			HaveField("NodeReady", true), HaveField("WaitingFor", "")), why)
		c := meta.FindStatusCondition(on.WR().Status.Conditions, windows.ConditionHealthy)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(Equal(metav1.ConditionTrue))
		Expect(c.Message).To(ContainSubstring("1 of 1 Windows nodes joined"))
		Expect(on.Phase()).To(Equal(v1alpha1.PhaseReady))
	})
})
