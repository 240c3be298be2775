package controllers_test

import (
	"fmt"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

var _ = Describe("Migrating a Calico cluster to Windows-ready", core, func() {
	var op *operator

	AfterEach(func() {
		resetCluster(op)
		op = nil
	})

	It("takes the seed's main cluster to Ready with exactly the expected end state", func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		on.CreateWR()

		Eventually(on.Condition(conditions.Ready)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonMigrated), "the migration finishes")
		wr := on.WR()
		Expect(wr.Status.Phase).To(Equal(v1alpha1.PhaseReady))
		Expect(wr.Status.ObservedGeneration).To(Equal(wr.Generation))
		Expect(wr.Status.Steps).To(HaveLen(6))
		for _, s := range wr.Status.Steps {
			Expect(s.State).To(Equal(v1alpha1.StepCompleted), string(s.Name))
			Expect(s.Changed).To(BeTrue(), string(s.Name))
		}

		inst := on.Installation()
		Expect(inst.Spec.CalicoNetwork.IPPools).To(HaveLen(1))
		Expect(inst.Spec.CalicoNetwork.IPPools[0].Encapsulation).To(Equal(operatorv1.EncapsulationVXLAN))
		Expect(inst.Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)))
		Expect(inst.Spec.CalicoNetwork.WindowsDataplane).To(HaveValue(Equal(operatorv1.WindowsDataplaneHNS)))
		Expect(inst.Spec.ServiceCIDRs).To(Equal(on.ServiceCIDRs()))
		Expect(on.IPPool(inst.Spec.CalicoNetwork.IPPools[0].Name).Spec.VXLANMode).To(BeEquivalentTo("Always"))
		Expect(on.IPAMConfig().Spec.StrictAffinity).To(BeTrue())
		Expect(on.ServicesEndpoint().Data).To(Equal(map[string]string{
			calico.ServiceHostKey: "10.0.0.10", calico.ServicePortKey: "6443",
		}), "the address comes from kubeadm-config's controlPlaneEndpoint")
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.WindowsNodeDaemonSet}, ds)).To(Succeed())

		By("telling kubectl describe about every step's start and finish")
		Eventually(func() []string {
			var notes []string
			for _, e := range wrEvents() {
				notes = append(notes, e.Reason+": "+e.Note)
			}
			return notes
		}).Should(ContainElements(
			"StepStarted: migrating StrictAffinity", "StepFinished: migrating StrictAffinity: changed and applied by Calico",
			"StepStarted: migrating BGP", "StepFinished: migrating BGP: changed and applied by Calico",
			"StepFinished: migrating WindowsDataplane: changed and applied by Calico",
			"NetworkProbePassed: UDP 4789 passed on all 6 probed pairs",
			"Migrated: the cluster is ready for Windows nodes"))

		By("recording every original value, absent ones included")
		o := wr.Status.Originals
		Expect(o).NotTo(BeNil())
		Expect(o.IPAMConfig).To(Equal(v1alpha1.OriginalIPAMConfig{Present: true, StrictAffinity: false}))
		Expect(o.Pools).To(ConsistOf(v1alpha1.OriginalPool{Name: "default-ipv4-ippool", CIDR: "172.20.0.0/16", Encapsulation: "VXLANCrossSubnet"}))
		Expect(o.BGP).To(Equal(v1alpha1.OriginalValue{Present: true, Value: "Enabled"}))
		Expect(o.ServicesEndpoint.Present).To(BeFalse())
		Expect(o.ServiceCIDRs.Present).To(BeFalse())
		Expect(o.WindowsDataplane).To(Equal(v1alpha1.OriginalValue{Present: true, Value: "Disabled"}), "the Tigera operator defaults it")
		Expect(o.WindowsNodesPresent).To(BeFalse())

		By("writing each Calico object exactly once")
		Expect(look.CalicoWrites(op.writes.Snapshot())).To(Equal(map[string]int{
			"IPAMConfiguration patch":          1,
			"Installation patch":               3,
			"ConfigMap tigera-operator create": 1,
			"DaemonSet calico-system patch":    2,
		}), "the pools; steps 3 to 6 in one write; the hold's mark taken off; calico-node held and released")
	})

	It("refuses to start while UDP 4789 is blocked between two nodes, naming the pair", func() {
		cl := calicosim.MainCluster()
		seed(cl)
		agents.Block(netip.MustParseAddr(cl.Nodes[0].InternalIP), netip.MustParseAddr(cl.Nodes[2].InternalIP))
		op = startOperator(nil, nil)
		on.CreateWR()

		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonNetworkProbeFailed))
		msg := on.Condition(conditions.PreflightPassed)().Message
		Expect(msg).To(ContainSubstring("UDP 4789 did not pass 1 of 6 probed pairs"))
		Expect(msg).To(ContainSubstring("linux-0 (10.0.0.11) -> linux-2 (10.0.0.13)"))
		probe := on.WR().Status.Preflight.Probe
		Expect(probe.FailingPairs).To(BeEquivalentTo(1))
		Expect(probe.PassedPairs).To(BeEquivalentTo(5))
		Expect(on.WR().Status.Originals).To(BeNil(), "nothing recorded, nothing changed")
		Expect(look.CalicoWrites(op.writes.Snapshot())).To(BeEmpty())

		By("running again when asked to, once the path is open")
		agents.Reset()
		poke(controllers.RerunPreflightAnnotation, "after-firewall-fix")
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Expect(on.WR().Status.Preflight.Probe.FailingPairs).To(BeZero())
	})

	It("runs the probe agents as a DaemonSet for the round only, and counts a silent node as missing", func() {
		seed(calicosim.MainCluster())
		agents.Silence("linux-2")
		op = startOperator(nil, nil)
		on.CreateWR()

		ds := &appsv1.DaemonSet{}
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: probeNamespace, Name: probeAgentsName}, ds)
		}).Should(Succeed(), "the agents start")
		pod := ds.Spec.Template.Spec
		Expect(pod.HostNetwork).To(BeTrue())
		Expect(pod.NodeSelector).To(Equal(map[string]string{"kubernetes.io/os": "linux"}))
		Expect(pod.Tolerations).To(ContainElement(HaveField("Operator", corev1.TolerationOpExists)))
		sc := pod.Containers[0].SecurityContext
		Expect(sc.Capabilities.Add).To(ConsistOf(corev1.Capability("NET_RAW")))
		Expect(sc.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		Expect(sc.Privileged).To(BeNil())
		Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
		Expect(*sc.ReadOnlyRootFilesystem).To(BeTrue())
		Expect(pod.Containers[0].Args).To(Equal([]string{"probe", "--namespace=" + probeNamespace}))
		Eventually(func() string { return on.WR().Status.Message }).Should(ContainSubstring("2 of 3 nodes reported"))

		By("giving up on the silent node when the round's time is up")
		op.clock.Step(2 * time.Minute)
		poke("test/poke", "1")
		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonNetworkProbeFailed))
		probe := on.WR().Status.Preflight.Probe
		Expect(probe.MissingReports).To(BeEquivalentTo(1))
		Expect(probe.FirstMissing).To(Equal([]string{"linux-2"}))
		Expect(on.WR().Status.Message).To(ContainSubstring("1 nodes did not report (linux-2)"))

		By("removing the agents, the plan and the reports")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: probeNamespace, Name: probeAgentsName}, &appsv1.DaemonSet{}))
		}).Should(BeTrue())
		// The reports go once the status summing them up is saved.
		Eventually(func() []corev1.ConfigMap {
			reports := &corev1.ConfigMapList{}
			Expect(k8s.List(ctx, reports, client.InNamespace(probeNamespace), client.HasLabels{round.ReportLabel})).To(Succeed())
			return reports.Items
		}).Should(BeEmpty())
	})

	It("finishes with the same end state, applying nothing twice, when the manager restarts at every point", long, func() {
		seed(calicosim.MainCluster())
		Expect(on.IPAMConfig().Spec.StrictAffinity).To(BeFalse())
		baseline, unsureBase := auditedWrites()
		writes := metrics.NewWriteCounter(scheme)
		op = startOperator(nil, writes)
		on.CreateWR()

		// Restart whenever the reported progress changes: after each change,
		// in the middle of each wait, and after each finished step.
		seen := map[string]bool{}
		restarts := 0
		Eventually(func() v1alpha1.Phase {
			wr := on.WR()
			if msg := wr.Status.Message; msg != "" && !seen[msg] && wr.Status.Phase != v1alpha1.PhaseReady {
				seen[msg] = true
				op.stop()
				restarts++
				op = startOperator(op.clock, writes)
			}
			return wr.Status.Phase
		}).WithTimeout(3*time.Minute).Should(Equal(v1alpha1.PhaseReady), "a restart takes a second; progress and the pod network checks change the message often")
		Expect(restarts).To(BeNumerically(">=", 6), "restarted at least once per step")
		// A restart can stop the manager in the middle of a write: the API
		// server then logs a server error for a write storage may already
		// have committed. Such a write may count, never one that was accepted.
		want := map[string]int{
			"ipamconfigurations patch":          1,
			"installations patch":               3,
			"configmaps tigera-operator create": 1,
			"daemonsets calico-system patch":    2,
		}
		Eventually(func() error {
			accepted, unsure := auditedWrites()
			accepted = look.CalicoWrites(subtract(accepted, baseline))
			unsure = look.CalicoWrites(subtract(unsure, unsureBase))
			for k, n := range accepted {
				if n > want[k] {
					return fmt.Errorf("%s applied %d times, want %d; all writes: %v", k, n, want[k], appliedWritesSince(baseline)())
				}
			}
			for k, n := range want {
				if accepted[k]+unsure[k] < n {
					return fmt.Errorf("%s applied %d times (%d unsure), want %d; all writes: %v", k, accepted[k], unsure[k], n, appliedWritesSince(baseline)())
				}
			}
			return nil
		}).WithTimeout(30*time.Second).Should(Succeed(), "the API server applied each change once")
	})
})
