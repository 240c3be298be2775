package calicosim_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("The simulated DaemonSet controller", func() {
	var sim *calicosim.Simulator
	AfterEach(func() { Expect(calicosim.Clean(ctx, k8s)).To(Succeed()) })
	BeforeEach(func() {
		sim = startSimulator(calicosim.Options{RolloutStep: 150 * time.Millisecond})
		Expect(calicosim.Seed(ctx, k8s, calicosim.MainClusterOf(6))).To(Succeed())
		Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
	})

	It("rolls calico-node out maxUnavailable nodes at a time, and a strategy change alone rolls nothing", func() {
		patchInstallation(`[{"op":"replace","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable","value":"50%"}]`)
		Eventually(func() string {
			return daemonSet("calico-node").Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String()
		}).WithPolling(poll).WithTimeout(settleTimeout).Should(Equal("50%"), "the operator copies the Installation's nodeUpdateStrategy")
		Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
		Expect(sim.Rollouts("calico-system", "calico-node")).To(BeZero(), "no template change, no rollout")

		// Every status the API server stores is seen through a watch: a
		// poll, slow on a loaded machine, can miss a round's 150 ms.
		wc, err := client.NewWithWatch(cfg, client.Options{Scheme: calico.NewScheme()})
		Expect(err).NotTo(HaveOccurred())
		w, err := wc.Watch(ctx, &appsv1.DaemonSetList{}, client.InNamespace("calico-system"),
			client.MatchingFields{"metadata.name": "calico-node"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(w.Stop)
		var most int32
		seen := map[string]bool{}
		peak := func() int32 {
			for {
				select {
				case ev := <-w.ResultChan():
					if ds, ok := ev.Object.(*appsv1.DaemonSet); ok {
						most = max(most, ds.Status.NumberUnavailable)
						seen[ds.ResourceVersion] = true
					}
				default:
					return most
				}
			}
		}
		patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)
		Eventually(func(g Gomega) {
			peak()
			ok, why, err := calicosim.Settled(ctx, k8s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(BeTrue(), why)
		}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
		// The watch delivers in order: once it has shown the settled
		// DaemonSet, it has shown every state before it.
		settled := daemonSet("calico-node").ResourceVersion
		Eventually(func() bool { peak(); return seen[settled] }).WithPolling(poll).WithTimeout(settleTimeout).Should(BeTrue())
		Expect(most).To(BeEquivalentTo(3), "half of 6 nodes at a time, never more")
		Expect(sim.Rollouts("calico-system", "calico-node")).To(And(HaveField("Rollouts", 1), HaveField("Replacements", 6),
			HaveField("MostUnavailable", 3), HaveField("PerNode", And(HaveLen(6), HaveEach(1)))), "each node replaced once")

		By("putting the strategy back after the rollout, which rolls nothing either")
		patchInstallation(`[{"op":"replace","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable","value":1}]`)
		Eventually(func() string {
			return daemonSet("calico-node").Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String()
		}).WithPolling(poll).WithTimeout(settleTimeout).Should(Equal("1"))
		Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
		Expect(sim.Rollouts("calico-system", "calico-node").Rollouts).To(Equal(1))
	})

	It("counts a change in the middle of a rollout as a second rollout", func() {
		before := daemonSet("calico-node").Generation
		patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`)
		Eventually(func(g Gomega) {
			st := daemonSet("calico-node").Status
			g.Expect(st.ObservedGeneration).To(BeNumerically(">", before), "the new template is rolling out")
			g.Expect(st.UpdatedNumberScheduled).To(BeNumerically(">=", 2))
		}).WithPolling(poll).WithTimeout(settleTimeout).Should(Succeed())
		patchInstallation(`[{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Enabled"}]`)
		Expect(calicosim.WaitSettled(ctx, k8s, settleTimeout)).To(Succeed())
		stats := sim.Rollouts("calico-system", "calico-node")
		Expect(stats.Rollouts).To(Equal(2))
		Expect(stats.Replacements).To(BeNumerically(">", 6+2), "the nodes already updated were replaced again")
		writes := sim.Writes()
		Expect(writes["Pod update"]).To(BeNumerically(">", 0), "a pod replaced again is relabelled in place")
		Expect(writes["Pod status"]).To(Equal(writes["Pod create"]),
			"a pod's status is written when it is created; a replacement leaves a running, ready status as it is: %v", writes)
	})
})
