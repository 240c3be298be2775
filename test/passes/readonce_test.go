package passes_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/test/calicosim"
)

// The passes before the first change (those the probe round and the pod
// network check wake) read the cluster past the cache only when what the
// preflight reads has changed, and a spec edit of fields that the targets
// and the probe do not read leaves them as they were.
var _ = Describe("What the passes before the first change read again", func() {
	// gathers counts the preflight's reads of the cluster past the cache:
	// each lists the ImageSets once, which nothing else reads (the rounds
	// list the Nodes past the cache too).
	gathers := func(b *inlineBed) int { return b.reads.Snapshot()[metrics.ReadFromAPIServer+" ImageSet list"] }
	// detections counts the targets' detections: while neither the spec nor
	// the Installation sets the service network, each lists the
	// ServiceCIDRs, which nothing else reads.
	detections := func(b *inlineBed) int { return b.reads.Snapshot()[metrics.ReadFromAPIServer+" ServiceCIDR list"] }
	probesStarted := func(b *inlineBed) int { return b.events.count("Normal " + conditions.ReasonNetworkProbeStarted) }
	// The first change is made in the pass that records the originals.
	recorded := func(b *inlineBed) func() bool {
		return func() bool { return b.on.WR().Status.Originals != nil }
	}
	probed := func(b *inlineBed) func() bool {
		return func() bool {
			pf := b.on.WR().Status.Preflight
			return pf != nil && pf.Probe != nil && pf.Probe.CompletedAt != nil
		}
	}
	approval := func(wr *v1alpha1.WindowsReadiness) { wr.Spec.RequireApproval = true }

	It("reads the cluster past the cache once for all the passes before the first change", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR(approval)
		reconcileUntil(b, recorded(b), BeTrue())
		Expect(b.passes).To(BeNumerically(">=", 4), "the probe round and the pod network check wake passes of their own")
		Expect(gathers(b)).To(Equal(1), "one preflight for %d passes", b.passes)
		Expect(b.on.WR().Status.Preflight.InputDigest).NotTo(BeEmpty(), "the status shows what the verdict was reached on")
		Expect(b.on.Condition(conditions.PreflightPassed)()).To(HaveField("Status", metav1.ConditionTrue))
	})

	It("reads it again, and probes again, when a Linux node joins before the first change", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR(approval)
		reconcileUntil(b, probed(b), BeTrue())
		Expect(gathers(b)).To(Equal(1))
		first := b.on.WR().Status.Preflight.Probe.Round

		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "linux-3", Labels: map[string]string{calico.OSLabel: "linux"}}}
		Expect(b.k8s.Create(ctx, node)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(b.k8s.Delete(ctx, node))).To(Succeed()) })
		base := node.DeepCopy()
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.14"}}
		Expect(b.k8s.Status().Patch(ctx, node, client.MergeFrom(base))).To(Succeed())

		reconcileUntil(b, recorded(b), BeTrue())
		Expect(gathers(b)).To(Equal(2), "a new Node is a new input of the checks")
		Expect(probesStarted(b)).To(Equal(2), "the round that passed did not probe the new node")
		probe := b.on.WR().Status.Preflight.Probe
		Expect(probe.Round).NotTo(Equal(first))
		Expect(probe.Nodes).To(BeEquivalentTo(4), "the new round probed the new node too")
	})

	It("neither probes nor reads the cluster again for a pause before the first change", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR(approval)
		reconcileUntil(b, probed(b), BeTrue())
		first := b.on.WR().Status.Preflight.Probe.Round

		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhasePaused))
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		reconcileUntil(b, recorded(b), BeTrue())
		Expect(b.on.WR().Status.Preflight.Probe.Round).To(Equal(first), "the round that passed still stands")
		Expect(probesStarted(b)).To(Equal(1), "no round was started again")
		Expect(gathers(b)).To(Equal(1), "the checks' inputs did not change")
		Expect(detections(b)).To(Equal(1), "nor did the targets'")
	})

	It("does not detect the targets again for an approval", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR(approval)
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseAwaitingApproval))
		Expect(detections(b)).To(Equal(1))
		targets := b.on.WR().Status.Targets

		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation}
		})
		reconcileUntil(b, b.on.Step(v1alpha1.StepEncapsulation), HaveField("State", v1alpha1.StepCompleted))
		Expect(detections(b)).To(Equal(1), "the spec fields the targets are resolved from did not change")
		Expect(b.on.WR().Status.Targets).To(Equal(targets))
	})

	It("resolves the targets again when the Installation gets a service network before the first change", func() {
		b := driveInline(calicosim.MainCluster())
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = true })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhasePlanned))
		Expect(b.on.WR().Status.Targets.ServiceCIDRs).To(Equal(b.on.ServiceCIDRs()), "detected")

		inst := b.on.Installation()
		base := inst.DeepCopy()
		inst.Spec.ServiceCIDRs = []string{"10.100.0.0/16"}
		Expect(b.k8s.Patch(ctx, inst, client.MergeFrom(base))).To(Succeed())
		reconcileUntil(b, func() []string { return b.on.WR().Status.Targets.ServiceCIDRs }, Equal([]string{"10.100.0.0/16"}),
			"what the Installation holds is kept, not replaced with what was detected before")
		Expect(b.on.WR().Status.Plan).NotTo(ContainElement(HaveField("Step", v1alpha1.StepServiceCIDRs)), "nothing to change there")
	})
})
