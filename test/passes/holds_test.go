package passes_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

// The specs of the migration's order, its holds (pause, approval, Calico
// Degraded) and its reverts, driven pass by pass (inlineBed): each says what
// the cluster holds after the passes it names, whatever the timing.
var _ = Describe("Migrating pass by pass", func() {
	var b *inlineBed

	BeforeEach(func() { b = driveInline(calicosim.MainCluster()) })

	// hold says what keeps a migration from its first change, and how it
	// is released.
	type hold struct {
		spec     func(*v1alpha1.WindowsReadiness)
		before   func()
		phase    v1alpha1.Phase
		says     types.GomegaMatcher
		released func()
	}

	DescribeTable("makes no change to Calico while held, says why, and goes on by itself once released",
		func(h hold) {
			if h.before != nil {
				h.before()
			}
			b.on.CreateWR(h.spec)
			reconcileUntil(b, b.on.Phase, Equal(h.phase))
			b.rest(10 * time.Minute)
			Expect(b.on.Phase()).To(Equal(h.phase), "still held ten minutes later")
			Expect(b.on.WR().Status.Message).To(h.says)
			Expect(b.on.Condition(conditions.Stalled)().Status).NotTo(Equal(metav1.ConditionTrue), "a hold is not a stall")
			Expect(look.CalicoWrites(b.r.Writes.Snapshot())).To(BeEmpty())
			Expect(b.on.IPAMConfig().Spec.StrictAffinity).To(BeFalse())

			h.released()
			reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		},
		Entry("paused: it goes on when unpaused", hold{
			spec:     func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true },
			phase:    v1alpha1.PhasePaused,
			says:     ContainSubstring("paused"),
			released: func() { b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false }) },
		}),
		Entry("Calico Degraded before the first change: it goes on when Calico recovers", hold{
			spec:     func(*v1alpha1.WindowsReadiness) {},
			before:   func() { b.sim.InjectFault("calico-node crash looping on linux-1") },
			phase:    v1alpha1.PhaseMigrating,
			says:     ContainSubstring("crash looping"),
			released: func() { b.sim.ClearFault() },
		}),
		Entry("the UDP probe skipped and the dry run on: it goes on when the dry run is switched off", hold{
			spec: func(wr *v1alpha1.WindowsReadiness) {
				wr.Spec.DryRun = true
				wr.Spec.Preflight.SkipNetworkProbe = true
			},
			phase:    v1alpha1.PhasePlanned,
			says:     ContainSubstring("dry run"),
			released: func() { b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = false }) },
		}),
	)

	It("writes no status in a pass before the first change that finds what the last one found", func() {
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhasePaused))
		b.rest(time.Minute)
		checked := b.on.WR().Status.Preflight.CompletedAt
		before := b.r.Writes.Total()
		b.clock.Step(time.Minute)
		b.pass()
		Expect(b.r.Writes.Total()).To(Equal(before), "the same verdicts a minute later: nothing to write")
		Expect(b.on.WR().Status.Preflight.CompletedAt).To(Equal(checked))
	})

	It("waits for approval before each disruptive step", func() {
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.RequireApproval = true })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseAwaitingApproval))
		Expect(b.on.WR().Status.Message).To(ContainSubstring("step 2/6 (Encapsulation): waiting for approval"))
		Expect(b.on.Step(v1alpha1.StepStrictAffinity)().State).To(Equal(v1alpha1.StepCompleted), "non-disruptive steps go ahead")
		Expect(b.on.KStatus()).To(Equal(status.InProgressStatus))

		for i, step := range []v1alpha1.StepName{v1alpha1.StepEncapsulation, v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint} {
			b.rest(time.Hour)
			Expect(b.on.Step(step)().State).NotTo(Equal(v1alpha1.StepCompleted), "%s waits for its approval", step)
			b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.ApprovedSteps = append(wr.Spec.ApprovedSteps, step) })
			reconcileUntil(b, func() v1alpha1.StepState { return b.on.Step(step)().State }, Equal(v1alpha1.StepCompleted))
			if i < 2 {
				reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseAwaitingApproval))
			}
		}
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
	})

	rollouts := func() int { return b.sim.Rollouts(calico.SystemNamespace, calico.NodeDaemonSet).Rollouts }

	DescribeTable("rolls calico-node out for the migration and its rollback",
		func(conservative bool, migration, rollback int) {
			before := rollouts()
			b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.Conservative = conservative })
			reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
			Expect(rollouts() - before).To(Equal(migration))
			Expect(b.on.Step(v1alpha1.StepServicesEndpoint)().Changed).To(BeTrue())

			before = rollouts()
			b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
			reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
			Expect(rollouts() - before).To(Equal(rollback))
		},
		Entry("once each, BGP off and the services endpoint together (the old address handed over with BGP on)", false, 1, 1),
		Entry("once per change in the conservative mode", true, 2, 2),
	)

	// degradedDuring makes Calico Degraded while step waits for its held
	// rollout, as a change calico-node cannot run with would, and runs
	// winready until it sees it.
	degradedDuring := func(step v1alpha1.StepName) {
		GinkgoHelper()
		reconcileUntil(b, func() string { return b.on.Step(step)().Message }, ContainSubstring("calico-node rollout"))
		b.sim.InjectFault("calico-node crash looping on linux-2")
		reconcileUntil(b, b.on.Condition(conditions.CalicoHealthy), look.HaveStatus(metav1.ConditionFalse, conditions.ReasonCalicoDegraded))
	}

	It("stops changing the cluster when Calico goes Degraded in the middle of a step, and goes on when it recovers", func() {
		b.sim.HoldRollouts()
		// One change per step, so that a next step is left to hold back.
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Rollout.Conservative = true })
		degradedDuring(v1alpha1.StepBGP)
		b.sim.ReleaseRollouts()
		reconcileUntil(b, func() string { return b.on.WR().Status.Message }, ContainSubstring("recover from Degraded"))
		b.rest(10 * time.Minute)
		Expect(b.on.Phase()).To(Equal(v1alpha1.PhaseMigrating), "Calico may recover by itself: not stalled")
		Expect(b.on.ServicesEndpoint()).To(BeNil(), "the next step does not start")

		b.sim.ClearFault()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
	})

	It("lets a rollback undo the change while Calico stays Degraded", func() {
		b.sim.HoldRollouts()
		b.on.CreateWR()
		degradedDuring(v1alpha1.StepBGP)
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })

		reconcileUntil(b, func() *operatorv1.BGPOption { return b.on.Installation().Spec.CalicoNetwork.BGP },
			HaveValue(Equal(operatorv1.BGPEnabled)), "the rollback of BGP goes ahead although Calico is Degraded")
		reconcileUntil(b, func() string { return b.on.Condition(conditions.CalicoHealthy)().Message }, ContainSubstring("the rollback goes on to undo it"))

		b.sim.ClearFault()
		b.sim.ReleaseRollouts()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
	})

	It("re-runs the step that made Calico Degraded toward a corrected target, and nothing else", func() {
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.99", Port: 6443}
			wr.Spec.RequireApproval = true
			wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation, v1alpha1.StepBGP}
		})
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseAwaitingApproval))
		b.sim.HoldRollouts()
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = append(wr.Spec.ApprovedSteps, v1alpha1.StepServicesEndpoint)
		})
		degradedDuring(v1alpha1.StepServicesEndpoint)
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.10", Port: 6443}
		})
		reconcileUntil(b, func() string { return b.on.ServicesEndpoint().Data[calico.ServiceHostKey] }, Equal("10.0.0.10"),
			"the step that made Calico Degraded runs again with the corrected address")
		reconcileUntil(b, func() string { return b.on.Condition(conditions.CalicoHealthy)().Message }, ContainSubstring("re-running it toward the corrected target"))
		Expect(b.on.Step(v1alpha1.StepServiceCIDRs)().Changed).To(BeTrue(), "written in the same write as the services endpoint")

		b.sim.ClearFault()
		b.sim.ReleaseRollouts()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
	})

	DescribeTable("stalls once a wait outlasts its deadline, with no poke: the pass looks again at the deadline",
		func(spec func(*v1alpha1.WindowsReadiness), before func(), says []string, recovers func()) {
			before()
			b.on.CreateWR(spec)
			reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonStepTimeout))
			Expect(b.on.Phase()).To(Equal(v1alpha1.PhaseStalled))
			for _, s := range says {
				Expect(b.on.WR().Status.Message).To(ContainSubstring(s))
			}
			b.rest(time.Hour)
			Expect(b.events.count(corev1.EventTypeWarning+" "+conditions.ReasonStepTimeout)).To(Equal(1),
				"the stall is announced once, however many passes see it: %v", b.events.all())
			recovers()
			reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
			Expect(b.on.Condition(conditions.Stalled)().Status).To(Equal(metav1.ConditionFalse))
		},
		Entry("a step whose rollout does not move for the progress deadline, until Calico catches up",
			func(wr *v1alpha1.WindowsReadiness) { wr.Spec.PhaseTimeout = &metav1.Duration{Duration: time.Minute} },
			func() { b.sim.HoldRollouts() },
			[]string{"step 3/6 (BGP)", "calico-node rollout", "longer than the progress deadline 1m0s"},
			func() { b.sim.ReleaseRollouts() }),
		Entry("Calico Degraded for longer than the step deadline, until it recovers",
			func(*v1alpha1.WindowsReadiness) {},
			func() { b.sim.InjectFault("calico-node crash looping on linux-2") },
			[]string{"crash looping on linux-2", "longer than the step deadline"},
			func() { b.sim.ClearFault() }),
	)

	DescribeTable("checks the pod network after Encapsulation breaks TCP, ICMP passing, and stops with the checksum offload diagnosis",
		func(onFailure v1alpha1.PodCheckFailureAction, says string, encapsulation operatorv1.EncapsulationType) {
			DeferCleanup(b.sim.PodChecks().Reset)
			b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
				wr.Spec.RequireApproval = true
				wr.Spec.PodNetworkCheck.OnFailure = onFailure
			})
			reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseAwaitingApproval))
			Expect(b.on.WR().Status.PodNetworkCheck.Baseline).NotTo(BeNil(), "the baseline ran before the first change")
			b.sim.PodChecks().Break(calicosim.FaultTCP)
			b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
				wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation, v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint}
			})

			reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonPodNetworkCheckFailed))
			Expect(b.on.WR().Status.Message).To(And(ContainSubstring(says), ContainSubstring("checksum offload")))
			b.rest(time.Hour)
			Expect(b.on.Installation().Spec.CalicoNetwork.IPPools[0].Encapsulation).To(Equal(encapsulation))
			Expect(b.on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)), "no further step ran")
		},
		Entry("leaving Encapsulation as it is when asked to stop", v1alpha1.PodCheckStop, "ChecksumOffloadBroken=true", operatorv1.EncapsulationVXLAN),
		Entry("reverting Encapsulation when asked to revert", v1alpha1.PodCheckRevert, "was reverted", operatorv1.EncapsulationVXLANCrossSubnet),
	)
})
