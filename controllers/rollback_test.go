package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
)

// touched is every field a migration may change, as a comparable value.
type touched struct {
	Pools            []operatorv1.IPPool
	BGP              *operatorv1.BGPOption
	WindowsDataplane *operatorv1.WindowsDataplaneOption
	WindowsNodes     *operatorv1.WindowsNodeSpec
	ServiceCIDRs     []string
	IPAM             *calicov3.IPAMConfigurationSpec
	ServicesEndpoint map[string]string
	// NodeEnv is the API server address calico-node runs with.
	NodeEnv [2]string
}

func touchedFields() touched {
	inst := installation()
	t := touched{
		Pools:            inst.Spec.CalicoNetwork.IPPools,
		BGP:              inst.Spec.CalicoNetwork.BGP,
		WindowsDataplane: inst.Spec.CalicoNetwork.WindowsDataplane,
		WindowsNodes:     inst.Spec.WindowsNodes,
		ServiceCIDRs:     inst.Spec.ServiceCIDRs,
	}
	if cfg := ipamConfig(); cfg != nil {
		t.IPAM = &cfg.Spec
	}
	if cm := servicesEndpoint(); cm != nil {
		t.ServicesEndpoint = cm.Data
	}
	ds := &appsv1.DaemonSet{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}, ds)).To(Succeed())
	t.NodeEnv[0], _ = calico.ContainerEnv(ds, calico.NodeContainer, calico.ServiceHostKey)
	t.NodeEnv[1], _ = calico.ContainerEnv(ds, calico.NodeContainer, calico.ServicePortKey)
	return t
}

func windowsNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{calico.OSLabel: calico.OSWindows}}}
}

var _ = Describe("Rolling back", func() {
	var (
		op       *operator
		original touched
	)

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		original = touchedFields()
		op = startOperator(nil, nil)
	})

	AfterEach(func() { resetCluster(op) })

	rollback := func() {
		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
	}

	It("restores every touched field after a full migration, and migrating again works", func() {
		createWR()
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		Expect(touchedFields()).NotTo(Equal(original))

		rollback()
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(condition(conditions.Ready)()).To(haveStatus(metav1.ConditionTrue, conditions.ReasonRolledBack))
		Expect(touchedFields()).To(Equal(original), "every field as it was found")
		for _, s := range getWR().Status.Steps {
			Expect(s.State).To(Equal(v1alpha1.StepReverted), string(s.Name))
		}
		Expect(getWR().Status.Originals).To(BeNil(), "a later migration records the originals afresh")
		inst := installation()
		Expect(inst.Spec.CalicoNetwork.HostPorts).NotTo(BeNil(), "the Tigera operator's own defaults are left alone")

		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionMigrate })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		Expect(installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)))
	})

	DescribeTable("restores every touched field from a migration stopped midway",
		func(after v1alpha1.StepName) {
			createWR()
			Eventually(func() v1alpha1.StepState { return stepOf(after)().State }).Should(Equal(v1alpha1.StepCompleted))
			rollback()
			Eventually(phaseOf).Should(Equal(v1alpha1.PhaseRolledBack))
			Expect(touchedFields()).To(Equal(original))
		},
		Entry("after StrictAffinity", v1alpha1.StepStrictAffinity),
		Entry("after Encapsulation", v1alpha1.StepEncapsulation),
		Entry("after BGP", v1alpha1.StepBGP),
		Entry("after ServicesEndpoint", v1alpha1.StepServicesEndpoint),
		Entry("after ServiceCIDRs", v1alpha1.StepServiceCIDRs),
	)

	It("is refused while a Windows node exists, without writing anything", func() {
		createWR()
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		Eventually(func() error { return k8s.Create(ctx, windowsNode("win-1")) }).Should(Succeed(), "a Ready cluster admits Windows nodes")
		Eventually(func() []string { return getWR().Status.WindowsNodes }).Should(Equal([]string{"win-1"}))
		before := touchedFields()
		baseline := appliedWrites()

		rollback()
		Eventually(condition(conditions.Stalled)).Should(haveStatus(metav1.ConditionTrue, conditions.ReasonWindowsNodesPresent))
		Expect(condition(conditions.RollbackAllowed)()).To(haveStatus(metav1.ConditionFalse, conditions.ReasonWindowsNodesPresent))
		Expect(condition(conditions.RollbackAllowed)().Message).To(ContainSubstring("win-1"))
		Expect(phaseOf()).To(Equal(v1alpha1.PhaseStalled))
		Consistently(func() map[string]int { return calicoOnly(appliedWritesSince(baseline)()) }).Should(BeEmpty(),
			"no write to any Calico object or ConfigMap")
		Expect(touchedFields()).To(Equal(before))

		By("going on once the Windows node is gone")
		deleteNode("win-1")
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(touchedFields()).To(Equal(original))
	})

	It("stops between two steps when a Windows node joins during the rollback", func() {
		createWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.WindowsNodeGate = v1alpha1.GateDisabled })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		rollback()
		Eventually(func() v1alpha1.StepState { return stepOf(v1alpha1.StepWindowsDataplane)().State }).Should(Equal(v1alpha1.StepReverting))
		Expect(k8s.Create(ctx, windowsNode("win-1"))).To(Succeed())

		Eventually(condition(conditions.Stalled)).Should(haveStatus(metav1.ConditionTrue, conditions.ReasonWindowsNodesPresent))
		Expect(getWR().Status.Message).To(ContainSubstring("set spec.direction: Migrate"))
		Eventually(func() bool {
			_, held := calico.HeldSince(installation())
			return held
		}).Should(BeFalse(), "the changes written before the node joined reach calico-node")
		baseline := appliedWrites()
		Consistently(func() map[string]int { return calicoOnly(appliedWritesSince(baseline)()) }).Should(BeEmpty(), "nothing more is changed")
		for _, s := range getWR().Status.Steps {
			Expect(s.State).To(BeElementOf(v1alpha1.StepCompleted, v1alpha1.StepReverting, v1alpha1.StepReverted), string(s.Name))
		}

		By("finishing the migration again when asked to")
		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionMigrate })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
	})
})

var _ = Describe("The Windows join gate", func() {
	var op *operator

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
	})

	AfterEach(func() { resetCluster(op) })

	// A dry run goes through admission without creating the node, so a
	// rejection can be waited for without leaving a node behind.
	wouldAdmit := func() error { return k8s.Create(ctx, windowsNode("win-1"), client.DryRunAll) }
	createWindowsNode := func() error { return k8s.Create(ctx, windowsNode("win-1")) }

	It("rejects a Windows node before Ready and during a rollback, and admits it when Ready", func() {
		createWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhasePaused))
		Eventually(wouldAdmit).Should(MatchError(And(
			ContainSubstring("not ready for Windows nodes yet"),
			ContainSubstring("WindowsReadiness default is Paused"))))
		Expect(createWindowsNode()).NotTo(Succeed())
		Expect(k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "linux-9",
			Labels: map[string]string{calico.OSLabel: "linux"}}})).To(Succeed(), "Linux nodes are not gated")
		DeferCleanup(deleteNode, "linux-9")

		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		Eventually(wouldAdmit).Should(Succeed(), "the gate is gone once Ready")
		Expect(createWindowsNode()).To(Succeed())
		deleteNode("win-1")

		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(wouldAdmit).Should(MatchError(ContainSubstring("not ready for Windows nodes yet")))
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseRolledBack))
		Eventually(wouldAdmit).Should(MatchError(ContainSubstring("is RolledBack")))
	})

	It("refuses relabelling a node Windows through nodes/status until Ready, and passes an admitted node's heartbeats", func() {
		// What a kubelet whose create was refused does (PatchNodeStatus with
		// its labels), or anyone with nodes/status patch.
		relabel := func(name string) func() error {
			return func() error {
				node := &corev1.Node{}
				if err := k8s.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
					return err
				}
				patch := client.MergeFrom(node.DeepCopy())
				node.Labels[calico.OSLabel] = calico.OSWindows
				return k8s.Status().Patch(ctx, node, patch, client.DryRunAll)
			}
		}
		createWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhasePaused))
		Eventually(wouldAdmit).Should(MatchError(ContainSubstring("not ready for Windows nodes yet")))
		Expect(relabel("linux-0")()).To(MatchError(ContainSubstring("not ready for Windows nodes yet")),
			"the gate is evaluated on the status subresource too")

		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhaseReady))
		Eventually(relabel("linux-0")).Should(Succeed(), "the gate is open once Ready")
		Expect(createWindowsNode()).To(Succeed())
		DeferCleanup(deleteNode, "win-1")

		By("closing the gate again with a rollback, under an admitted Windows node")
		updateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(relabel("linux-0")).Should(MatchError(ContainSubstring("not ready for Windows nodes yet")))
		heartbeat := func() error {
			node := &corev1.Node{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: "win-1"}, node); err != nil {
				return err
			}
			patch := client.MergeFrom(node.DeepCopy())
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}}
			return k8s.Status().Patch(ctx, node, patch)
		}
		Expect(heartbeat()).To(Succeed(), "an admitted Windows node's status updates still pass")
	})

	It("never blocks a Linux node, even with the WindowsReadiness and its CRD uninstalled around it", func() {
		createWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(phaseOf).Should(Equal(v1alpha1.PhasePaused))
		Eventually(wouldAdmit).Should(MatchError(ContainSubstring("not ready for Windows nodes yet")))
		op.stop()

		By("deleting the WindowsReadiness with --cascade=orphan, then the CRD")
		wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
		Expect(k8s.Delete(ctx, wr, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		// The garbage collector (which envtest lacks) orphans the dependents
		// and removes its finalizer.
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(wr), wr); err != nil {
				return client.IgnoreNotFound(err)
			}
			wr.Finalizers = nil
			return k8s.Update(ctx, wr)
		}).Should(Succeed())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "windowsreadinesses.winready.io"}, crd)).To(Succeed())
		Expect(k8s.Delete(ctx, crd)).To(Succeed())
		reinstall := func() {
			_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: crdPaths(false)[:1]})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() error { return k8s.List(ctx, &v1alpha1.WindowsReadinessList{}) }).Should(Succeed())
		}
		Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd)) }).Should(BeTrue())

		linux := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "linux-9", Labels: map[string]string{calico.OSLabel: "linux"}}}
		Eventually(func() error { return k8s.Create(ctx, linux, client.DryRunAll) }).Should(Succeed(), "a Linux node registers")
		node := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "linux-0"}, node)).To(Succeed())
		node.Labels["example.com/cordoned"] = "true"
		Expect(k8s.Update(ctx, node, client.DryRunAll)).To(Succeed(), "a Linux node is labelled")
		unlabelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain-9"}}
		Expect(k8s.Create(ctx, unlabelled, client.DryRunAll)).To(Succeed(), "an unlabelled node registers")
		reinstall()
		op = startOperator(nil, nil)
	})

	It("admits Windows nodes when switched off in the spec", func() {
		createWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Paused = true
			wr.Spec.WindowsNodeGate = v1alpha1.GateDisabled
		})
		Eventually(phaseOf).Should(Equal(v1alpha1.PhasePaused))
		Eventually(wouldAdmit).Should(Succeed())
		Consistently(wouldAdmit).Should(Succeed())
	})
})
