package e2e

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
)

// The canary against the real Tigera operator and DaemonSet controller:
// which nodes run the new calico-node is read from the pods the DaemonSet
// controller labels, and the pace is what calico-node's DaemonSet gets. No
// pod runs on kwok nodes, so on the real backend the UDP probe's agents and
// the pod network check's pods are played in this process
// (calicosim.ProbeAgents runs winready's own probe.RunRound over a simulated
// network, calicosim.PodChecks plays the check pods; both write their
// reports through the API server, as on the simulator's backend).
var _ = Describe("The canary inside calico-node's rollout, on the Tigera operator", Label("core"), Ordered, func() {
	const nodes = 6
	var cl calicosim.Cluster

	BeforeAll(func() {
		cl = pacedCluster(nodes)
		Expect(calicoBackend.Seed(ctx, k8s, cl)).To(Succeed())
		DeferCleanup(func() {
			var names []string
			for _, n := range cl.Nodes {
				names = append(names, n.Name)
			}
			if _, ok := calicoBackend.(*realBackend); ok {
				Expect(removeNodes(ctx, k8s, names...)).To(Succeed())
			}
		})
		if _, ok := calicoBackend.(*realBackend); ok {
			playRoundAgents()
		}
		Eventually(atRest).WithTimeout(5*time.Minute).Should(Succeed(), "calico-node on the paced nodes, rolled out")
	})

	It("rolls the canary's nodes one at a time, then goes on at spec.rollout.maxUnavailable, each pod replaced once", func() {
		paces, replaced := templatePaces(), replacements()
		from := templateGeneration()
		quarter := intstr.FromString("25%")
		wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
			Spec: v1alpha1.WindowsReadinessSpec{
				Rollout: v1alpha1.RolloutSpec{MaxUnavailable: &quarter, Canary: ptr.To(intstr.FromInt32(2))}}}
		Expect(k8s.Create(ctx, wr)).To(Succeed())
		DeferCleanup(leaveAsFound)
		Eventually(on.Phase).WithTimeout(5*time.Minute).Should(Equal(v1alpha1.PhaseReady), why)

		probe := on.WR().Status.Preflight.Probe
		Expect(probe).NotTo(BeNil())
		GinkgoWriter.Printf("probe: %d nodes, %d pairs passed\n", probe.Nodes, probe.PassedPairs)
		Expect(probe.Nodes).To(BeNumerically(">=", nodes))
		Expect(probe.PassedPairs).To(BeEquivalentTo(probe.Nodes*(probe.Nodes-1)), "every node heard every other: %+v", probe)
		c := on.WR().Status.Canary
		Expect(c).NotTo(BeNil())
		Expect(c.State).To(Equal(v1alpha1.CanaryPassed))
		Expect(c.Nodes).To(HaveLen(2), "the canary's nodes, named from the pods the DaemonSet controller labelled")
		GinkgoWriter.Printf("canary: nodes %v, %s\n", c.Nodes, c.Round.Diagnosis)
		Expect(c.Round.TestedPairs).To(Equal(int32(2+2*3*2)),
			"the canary's two nodes test each other and three nodes on the old calico-node each, both ways")
		By("giving calico-node's new template maxUnavailable 1, then the spec's")
		seen := paces()
		GinkgoWriter.Printf("canary: calico-node's template generation and maxUnavailable as it changed: %v\n", seen)
		Expect(firstPaceAfter(seen, from)).To(Equal("1"), "the DaemonSet's first new template rolls one node at a time")
		Expect(seen).To(ContainElement(HaveField("MaxUnavailable", "25%")), "then spec.rollout.maxUnavailable")
		Eventually(replaced).Should(HaveLen(nodes), "every node's calico-node pod replaced")
		Consistently(replaced).Should(Equal(once(cl)), "each calico-node pod replaced once: the pace is no part of the template")
	})
})

// playRoundAgents plays the UDP probe's agents and the pod network check's
// pods on the real backend's kwok nodes, until the container's specs end.
func playRoundAgents() {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Logger: GinkgoLogr, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	Expect(calicosim.NewProbeAgents(round.DefaultNamespace).SetupWithManager(mgr)).To(Succeed())
	Expect(calicosim.NewPodChecks(round.DefaultNamespace).SetupWithManager(mgr)).To(Succeed())
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done).Should(BeClosed())
	})
}

// templatePace is calico-node's template generation and maxUnavailable at
// one change of its DaemonSet.
type templatePace struct {
	Generation     string
	MaxUnavailable string
}

const templateGenerationAnnotation = appsv1.DeprecatedTemplateGeneration

// templateGeneration is calico-node's template generation now.
func templateGeneration() string {
	ds := &appsv1.DaemonSet{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}, ds)).To(Succeed())
	return ds.Annotations[templateGenerationAnnotation]
}

// templatePaces watches calico-node's DaemonSet from now on; the function
// it returns lists each template generation and maxUnavailable it had, in
// order, without missing one between two polls.
func templatePaces() func() []templatePace {
	list := &appsv1.DaemonSetList{}
	Expect(k8s.List(ctx, list, client.InNamespace(calico.SystemNamespace))).To(Succeed())
	watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := watcher.Watch(ctx, list, client.InNamespace(calico.SystemNamespace),
		client.MatchingFields{"metadata.name": calico.NodeDaemonSet}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	var mu sync.Mutex
	var seen []templatePace
	go func() {
		defer GinkgoRecover()
		for ev := range w.ResultChan() {
			ds, ok := ev.Object.(*appsv1.DaemonSet)
			if !ok {
				continue
			}
			p := templatePace{Generation: ds.Annotations[templateGenerationAnnotation], MaxUnavailable: "unset"}
			if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
				p.MaxUnavailable = ru.MaxUnavailable.String()
			}
			mu.Lock()
			if len(seen) == 0 || seen[len(seen)-1] != p {
				seen = append(seen, p)
			}
			mu.Unlock()
		}
	}()
	return func() []templatePace {
		mu.Lock()
		defer mu.Unlock()
		return append([]templatePace(nil), seen...)
	}
}

// firstPaceAfter is the maxUnavailable of the first template after
// generation from, "" when none came.
func firstPaceAfter(seen []templatePace, from string) string {
	for _, p := range seen {
		if p.Generation != from {
			return p.MaxUnavailable
		}
	}
	return ""
}
