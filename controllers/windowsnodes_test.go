package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/windows"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

// joinOf is the status entry of a Windows node's join, or an empty one.
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

// nodeEvents are the notes of the Events about the WindowsReadiness that
// name the Node name as their related object.
func nodeEvents(name string) func() []string {
	return func() []string {
		var notes []string
		for _, e := range wrEvents() {
			if e.Related != nil && e.Related.Kind == "Node" && e.Related.Name == name {
				notes = append(notes, e.Reason+": "+e.Note)
			}
		}
		return notes
	}
}

var _ = Describe("Watching Windows nodes join once the cluster is Ready", func() {
	var op *operator

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
	})

	AfterEach(func() {
		sim.ResetWindowsNodes()
		resetCluster(op)
	})

	It("reports a node that joins healthy, and writes nothing more once it has joined", func() {
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Eventually(on.Condition(windows.ConditionHealthy)).Should(look.HaveStatus(metav1.ConditionTrue, windows.ReasonNoWindowsNodes))

		Eventually(func() error { return k8s.Create(ctx, look.WindowsNode("win-1")) }).Should(Succeed(), "a Ready cluster admits Windows nodes")
		Eventually(joinOf("win-1")).Should(And(
			HaveField("State", v1alpha1.JoinJoined), HaveField("Pod", "calico-node-windows-win-1"), HaveField("PodPhase", "Running"),
			HaveField("PodReady", true), HaveField("Block", "172.20.0.0/26"), HaveField("NodeReady", true), HaveField("WaitingFor", "")),
			"the pod Ready, a block of its own, the node Ready")
		Eventually(on.Condition(windows.ConditionHealthy)).Should(And(look.HaveStatus(metav1.ConditionTrue, windows.ReasonJoined),
			HaveField("Message", ContainSubstring("1 of 1 Windows nodes joined"))))
		Eventually(func() []string { return on.WR().Status.WindowsNodes }).Should(Equal([]string{"win-1"}),
			"the list of names stays as it was, once the node cache has seen the node")
		Expect(on.Phase()).To(Equal(v1alpha1.PhaseReady))

		By("writing nothing when a change to the node changes nothing of its join")
		written := on.WR().ResourceVersion
		node := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "win-1"}, node)).To(Succeed())
		base := node.DeepCopy()
		node.Labels["example.com/pool"] = "windows"
		Expect(k8s.Patch(ctx, node, client.MergeFrom(base))).To(Succeed())
		Consistently(func() string { return on.WR().ResourceVersion }).Should(Equal(written))
		Expect(nodeEvents("win-1")()).To(BeEmpty(), "no Event for a node that joined")
	})

	DescribeTable("names a node that does not join in time, with its pod's reason, and sees it recover",
		func(b calicosim.WindowsNodeBehaviour, waiting string) {
			sim.SetWindowsNode("win-1", b)
			on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
				wr.Spec.WindowsNodes = &v1alpha1.WindowsNodesSpec{JoinTimeout: &metav1.Duration{Duration: time.Minute}}
			})
			Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
			Eventually(func() error { return k8s.Create(ctx, look.WindowsNode("win-1")) }).Should(Succeed(), "a Ready cluster admits Windows nodes")
			Eventually(joinOf("win-1")).Should(And(HaveField("State", v1alpha1.JoinJoining),
				HaveField("WaitingFor", ContainSubstring(waiting)), HaveField("Block", "")))
			Expect(on.Condition(windows.ConditionHealthy)()).To(And(look.HaveStatus(metav1.ConditionUnknown, windows.ReasonJoining),
				HaveField("Message", ContainSubstring("joining: win-1 (waiting for"))))
			Expect(nodeEvents("win-1")()).To(BeEmpty(), "no Event before the deadline")

			op.clock.Step(2 * time.Minute)
			poke("test/poke", "1")
			Eventually(on.Condition(windows.ConditionHealthy)).Should(And(look.HaveStatus(metav1.ConditionFalse, windows.ReasonNotJoined),
				HaveField("Message", ContainSubstring("not joined within 1m0s: win-1 (waiting for")),
				HaveField("Message", ContainSubstring(waiting))))
			Expect(joinOf("win-1")().State).To(Equal(v1alpha1.JoinOverdue))
			Eventually(nodeEvents("win-1")).Should(ConsistOf(And(
				HavePrefix("WindowsNodeNotJoined: Windows node win-1 has not joined within 1m0s: waiting for"), ContainSubstring(waiting))))
			Expect(on.Phase()).To(Equal(v1alpha1.PhaseReady), "the migration itself stays done")

			By("reporting the node joined once its pod recovers, with no second Event")
			sim.SetWindowsNode("win-1", calicosim.WindowsNodeBehaviour{Pod: calicosim.WindowsPodReady})
			Eventually(joinOf("win-1")).Should(And(HaveField("State", v1alpha1.JoinJoined), HaveField("WaitingFor", "")))
			Eventually(on.Condition(windows.ConditionHealthy)).Should(look.HaveStatus(metav1.ConditionTrue, windows.ReasonJoined))
			Consistently(nodeEvents("win-1")).Should(HaveLen(1))
		},
		Entry("a crash loop, with its last message",
			calicosim.WindowsNodeBehaviour{Pod: calicosim.WindowsPodCrashLoop, Message: "Failed to create HNS network: vSwitch not found"},
			"calico-node-windows pod calico-node-windows-win-1: crash loop: container felix restarted 5 times, last exit code 1 Error: Failed to create HNS network: vSwitch not found"),
		Entry("an image that cannot be pulled",
			calicosim.WindowsNodeBehaviour{Pod: calicosim.WindowsPodImagePull},
			`calico-node-windows pod calico-node-windows-win-1: image pull: container node ImagePullBackOff: Back-off pulling image "quay.io/calico/node-windows:v3.32.0"`),
		Entry("a pod the scheduler cannot place",
			calicosim.WindowsNodeBehaviour{Pod: calicosim.WindowsPodPending, Message: "0/4 nodes are available: 1 Insufficient memory."},
			"calico-node-windows pod calico-node-windows-win-1: pending, not scheduled: Unschedulable: 0/4 nodes are available: 1 Insufficient memory."),
	)
})
