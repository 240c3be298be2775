package controllers_test

import (
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("calico-node held while the Tigera operator reads a write spanning two objects", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	stats := func() calicosim.RolloutStats { return sim.Rollouts(calico.SystemNamespace, calico.NodeDaemonSet) }
	calicoNode := func() *appsv1.DaemonSet {
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}, ds)).To(Succeed())
		return ds
	}
	ignored := func() bool { return calico.Ignored(calicoNode()) }
	marked := func() bool {
		_, held := calico.HeldSince(on.Installation())
		return held
	}
	servicesEndpointWritten := func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}, &corev1.ConfigMap{})
	}

	// interruptedBatch takes a migration to the point where a reconcile of
	// the Tigera operator has read the Installation with BGP on, and
	// winready has since written BGP off and the services endpoint: the
	// reconcile, resumed, reads the new ConfigMap and renders calico-node
	// from both.
	interruptedBatch := func(mutate ...func(*v1alpha1.WindowsReadiness)) *calicosim.Interrupt {
		seed(calicosim.MainCluster())
		sim.ResetRolloutStats()
		op = startOperator(nil, nil)
		on.CreateWR(append(mutate, func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.RequireApproval = true
			wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation}
		})...)
		Eventually(on.Condition(conditions.Reconciling)).Should(And(HaveField("Reason", conditions.ReasonAwaitingApproval),
			HaveField("Message", ContainSubstring("BGP"))))
		stop := sim.InterruptRender()
		DeferCleanup(stop.Resume)
		Eventually(stop.Stopped).Should(BeClosed(), "a reconcile of the Tigera operator read the Installation and stopped")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = append(wr.Spec.ApprovedSteps, v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint)
		})
		Eventually(servicesEndpointWritten).Should(Succeed())
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)), "written before the ConfigMap")
		return stop
	}

	It("rolls calico-node out once, each node replaced once, though a reconcile under way read the Installation before the write", func() {
		stop := interruptedBatch()
		Expect(ignored()).To(BeTrue(), "calico-node held before the write")
		Expect(marked()).To(BeTrue(), "the Installation says so")
		stop.Resume()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Expect(stats()).To(And(HaveField("Rollouts", 1), HaveField("Replacements", 3)), "three nodes, each replaced once")
		Expect(ignored()).To(BeFalse(), "released")
		Expect(marked()).To(BeFalse())
		Expect(on.WR().Status.Originals.NodeIgnored).To(HaveValue(Equal(v1alpha1.OriginalValue{})), "recorded absent")
	})

	It("releases calico-node left held by a manager that stopped, once a new one starts", func() {
		stop := interruptedBatch()
		op.stop()
		Expect(ignored()).To(BeTrue())
		stop.Resume()
		Consistently(ignored).Should(BeTrue(), "nothing but winready lifts the hold")
		op = startOperator(nil, nil)
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Expect(stats()).To(And(HaveField("Rollouts", 1), HaveField("Replacements", 3)))
		Expect(ignored()).To(BeFalse())
		Expect(marked()).To(BeFalse())
	})

	It("releases calico-node while paused: the held changes are written and must reach the nodes", func() {
		stop := interruptedBatch()
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		stop.Resume()
		Eventually(ignored).Should(BeFalse())
		Eventually(func() string {
			v, _ := calico.ContainerEnv(calicoNode(), calico.NodeContainer, calico.NetworkingBackendEnv)
			return v
		}).Should(Equal(calico.BackendVXLAN))
		Expect(marked()).To(BeFalse())
		// The template is rendered; the rollout counts once its first pod is
		// replaced, which the simulated DaemonSet controller does next.
		Eventually(stats).Should(HaveField("Rollouts", 1))
		Consistently(stats).Should(HaveField("Rollouts", 1))
	})

	It("releases calico-node after HoldMax when the Tigera operator shows no sign of reading the changes", func() {
		stop := interruptedBatch()
		Consistently(ignored).Should(BeTrue(), "a stopped operator reads nothing: the hold waits")
		op.clock.Step(controllers.HoldMax)
		poke("test/poke", "1")
		Eventually(ignored).Should(BeFalse())
		Eventually(marked).Should(BeFalse())
		stop.Resume()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
	})

	It("releases calico-node and lifts every claim before the WindowsReadiness, deleted during the hold, goes", func() {
		interruptedBatch()
		Expect(calico.Claimed(calicoNode())).To(BeTrue(), "the hold is claimed")
		Expect(calico.Claimed(on.Installation())).To(BeTrue(), "so is the Installation winready wrote")
		Expect(on.WR().Finalizers).To(ContainElement(calico.ClaimFinalizer))
		on.DeleteWR()
		Expect(ignored()).To(BeFalse(), "released before the WindowsReadiness went")
		Expect(marked()).To(BeFalse())
		Expect(calico.Claimed(calicoNode())).To(BeFalse())
		Expect(calico.Claimed(on.Installation())).To(BeFalse())
		endpoint := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}, endpoint)).To(Succeed())
		Expect(calico.Claimed(endpoint)).To(BeFalse(), "the services endpoint keeps the values written, unclaimed")
		rec := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: record.Name}, rec)).To(Succeed(), "the record stays")
		Expect(calico.Claimed(rec)).To(BeFalse(), "a person may delete it, with no WindowsReadiness")
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)),
			"a delete is no rollback: the values written stay")
	})

	// annotate sets calico-node's ignore annotation as field manager owner.
	annotate := func(owner string) {
		ds := calicoNode()
		Expect(k8s.Patch(ctx, ds, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+calico.IgnoreAnnotation+`":"true"}}}`)), client.FieldOwner(owner))).To(Succeed())
	}

	It("removes an ignore annotation its own field manager set with no hold of its own under way", func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		annotate(controllers.FieldOwner)
		poke("test/poke", "1")
		Eventually(ignored).Should(BeFalse(), "no hold is marked on the Installation: the annotation outlives nothing")
		Expect(meta.FindStatusCondition(on.WR().Status.Conditions, conditions.CalicoNodeManaged)).To(BeNil())
	})

	It("names an ignore annotation someone else set in the status, and leaves it to them", func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		annotate("kubectl-annotate")
		poke("test/poke", "1")
		Eventually(on.Condition(conditions.CalicoNodeManaged)).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", conditions.ReasonCalicoNodeIgnored), HaveField("Message", ContainSubstring("kubectl-annotate"))))
		Consistently(ignored).Should(BeTrue(), "a person's hold is theirs to lift")
		ds := calicoNode()
		Expect(k8s.Patch(ctx, ds, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+calico.IgnoreAnnotation+`":null}}}`)))).To(Succeed())
		poke("test/poke", "2")
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(on.WR().Status.Conditions, conditions.CalicoNodeManaged)
		}).Should(BeNil(), "gone once lifted")
	})

	It("rolls back the same way: once, each node replaced once, through the hold", core, func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		sim.ResetRolloutStats()
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(stats()).To(And(HaveField("Rollouts", 1), HaveField("Replacements", 3)))
		Expect(ignored()).To(BeFalse())
		Expect(marked()).To(BeFalse())
	})
})
