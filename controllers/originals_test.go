package controllers_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

var _ = Describe("Keeping the originals", func() {
	var (
		op       *operator
		original look.Touched
	)

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		original = on.Touched()
		op = startOperator(nil, nil)
	})

	AfterEach(func() { resetCluster(op) })

	It("uses the record over originals in a restored status that disagree with it", func() {
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		op.stop()
		wr := on.WR()
		base := wr.DeepCopy()
		wr.Status.Originals.BGP = v1alpha1.OriginalValue{Present: true, Value: "Disabled"}
		Expect(k8s.Status().Patch(ctx, wr, client.MergeFrom(base))).To(Succeed())
		op = startOperator(op.clock, op.writes)

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(on.Touched()).To(Equal(original))
		Expect(on.Condition(conditions.OriginalsRecorded)()).To(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonRestoredFromRecord))
	})
})

var _ = Describe("A status that can always be written", func() {
	var op *operator

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
	})

	AfterEach(func() {
		for i := range 50 {
			deleteNode(longNodeName(i))
		}
		resetCluster(op)
	})

	It("refuses a rollback naming 50 Windows nodes with 63-character names within the status limits", long, func() {
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		for i := range 50 {
			Eventually(func() error { return k8s.Create(ctx, look.WindowsNode(longNodeName(i))) }).Should(Succeed())
		}
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled))
		wr := on.WR()
		Expect(wr.Status.Message).To(ContainSubstring("Windows nodes have joined (" + longNodeName(0)))
		Expect(len(wr.Status.Message)).To(BeNumerically("<=", 1024))
		Expect(wr.Status.WindowsNodes).To(HaveLen(50))
	})
})

func longNodeName(i int) string {
	prefix := fmt.Sprintf("win-%02d-", i)
	return prefix + strings.Repeat("x", 63-len(prefix))
}

var _ = Describe("Transient API errors", func() {
	var op *operator

	AfterEach(func() { resetCluster(op) })

	It("are retried until a migration and a rollback reach the same end state, each change applied once", longest, func() {
		seed(calicosim.MainCluster())
		original := on.Touched()
		baseline := appliedWrites()
		// A pass makes a score of requests: one in twenty failing still fails
		// most passes somewhere (about 50 failures before the request and 25
		// lost responses to Ready); one in ten failed nearly every pass and
		// spent a quarter more CPU on the same cases.
		flaky := newFlakiness(0.05, 0.2)
		op = startOperatorWith(operatorOptions{flaky: flaky})
		on.CreateWR()

		Eventually(on.Phase).WithTimeout(3*time.Minute).Should(Equal(v1alpha1.PhaseReady), "every failed request waits for its backoff")
		Expect(flaky.failedBefore.Load()).To(BeNumerically(">", 0))
		Expect(flaky.failedAfter.Load()).To(BeNumerically(">", 0))
		// calico-node's patches are the hold's annotation, set and removed: a
		// write that fails after the hold is set makes the next pass release
		// it and hold again, so they come in pairs; no change to Calico is
		// applied twice.
		holds := func() int { return look.CalicoWrites(appliedWritesSince(baseline)())["daemonsets calico-system patch"] }
		Eventually(func() map[string]int {
			w := look.CalicoWrites(appliedWritesSince(baseline)())
			delete(w, "daemonsets calico-system patch")
			return w
		}).Should(Equal(map[string]int{
			"ipamconfigurations patch":          1,
			"installations patch":               3,
			"configmaps tigera-operator create": 1,
		}), "each change applied once; all writes: %v", appliedWritesSince(baseline)())
		Eventually(func() bool { return holds() >= 2 && holds()%2 == 0 }).Should(BeTrue(), "the hold set and released in pairs: %d", holds())

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).WithTimeout(3 * time.Minute).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(on.Touched()).To(Equal(original))
	})
})

var _ = Describe("The probe round", func() {
	var op *operator

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
	})

	AfterEach(func() { resetCluster(op) })

	probeGone := func() bool {
		key := client.ObjectKey{Namespace: probeNamespace, Name: probeAgentsName}
		ds := apierrors.IsNotFound(k8s.Get(ctx, key, &appsv1.DaemonSet{}))
		secret := apierrors.IsNotFound(k8s.Get(ctx, key, &corev1.Secret{}))
		left := 0
		for _, label := range []string{round.ReportLabel, round.PlanLabel} {
			cms := &corev1.ConfigMapList{}
			Expect(k8s.List(ctx, cms, client.InNamespace(probeNamespace), client.HasLabels{label})).To(Succeed())
			left += len(cms.Items)
		}
		return ds && secret && left == 0
	}
	// probeFailures are the notes of the NetworkProbeFailed Events about
	// the WindowsReadiness.
	probeFailures := func() []string {
		var notes []string
		for _, e := range wrEvents() {
			if e.Reason == conditions.ReasonNetworkProbeFailed {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
	midRound := func() {
		agents.Silence("linux-2")
		on.CreateWR()
		Eventually(func() string { return on.WR().Status.Message }).Should(ContainSubstring("2 of 3 nodes reported"))
		Expect(probeGone()).To(BeFalse())
	}

	It("is removed when the spec skips the probe midway, and the migration goes on", func() {
		midRound()
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Preflight.SkipNetworkProbe = true })
		Eventually(probeGone).Should(BeTrue(), "the agents, the plan and the reports are gone")
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
	})

	It("is removed when the migration is paused, turned into a dry run or into a rollback midway", func() {
		midRound()
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(probeGone).Should(BeTrue())
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(func() string { return on.WR().Status.Message }).Should(ContainSubstring("2 of 3 nodes reported"))
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = true })
		Eventually(probeGone).Should(BeTrue(), "a dry run runs no agents")
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePlanned))
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.DryRun = false })

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(func() string { return on.WR().Status.Message }).Should(ContainSubstring("2 of 3 nodes reported"))
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(probeGone).Should(BeTrue())
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack))
	})

	It("counts against the plan the agents were given when a node joins mid-round", func() {
		midRound()
		late := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "linux-9", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
		Expect(k8s.Create(ctx, late)).To(Succeed())
		DeferCleanup(deleteNode, "linux-9")
		// A patch: the simulated Felix annotates a new Node with its tunnel
		// address, and an update of the Node as created would conflict.
		base := late.DeepCopy()
		late.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.99"}}
		Expect(k8s.Status().Patch(ctx, late, client.MergeFrom(base))).To(Succeed())

		op.clock.Step(2 * time.Minute)
		poke("test/poke", "1")
		// The round's outcome is read from its Event: a Linux node that joined
		// changes what the preflight read, so the pass after the failure may
		// already have started a round of four nodes, replacing the status.
		Eventually(probeFailures).Should(ConsistOf(And(
			ContainSubstring("1 nodes did not report (linux-2)"),
			Not(ContainSubstring("did not pass")), Not(ContainSubstring("linux-9")))),
			"the silent node only, not the one that joined, and no pair with it")
	})

	It("stalls with the API server's words when a change is refused for good, and goes on once the refusal is lifted", func() {
		// An admission policy that refuses BGP Disabled on the Installation,
		// as a platform's guard rail might.
		policy := denyPolicy("keep-bgp", admissionv1.Update, admissionv1.Rule{APIGroups: []string{"operator.tigera.io"},
			APIVersions: []string{"v1"}, Resources: []string{"installations"}},
			"!has(object.spec.calicoNetwork) || !has(object.spec.calicoNetwork.bgp) || object.spec.calicoNetwork.bgp != 'Disabled'",
			"BGP stays on in this cluster (policy keep-bgp)")
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "keep-bgp"},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "keep-bgp",
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
		for _, obj := range []client.Object{policy, binding} {
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed()) })
		}
		inst := on.Installation()
		Eventually(func() error {
			cp := inst.DeepCopy()
			cp.Spec.CalicoNetwork.BGP = ptr.To(operatorv1.BGPDisabled)
			return k8s.Update(ctx, cp, client.DryRunAll)
		}).Should(MatchError(ContainSubstring("BGP stays on")))

		on.CreateWR()
		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonRefusedByAPIServer))
		Expect(on.WR().Status.Message).To(And(ContainSubstring("refused a write 3 times"), ContainSubstring("BGP stays on in this cluster")))
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)))
		Expect(on.Step(v1alpha1.StepStrictAffinity)().State).To(Equal(v1alpha1.StepCompleted), "the steps before went ahead")

		By("going on once the policy is gone")
		for _, obj := range []client.Object{binding, policy} {
			Expect(k8s.Delete(ctx, obj)).To(Succeed())
		}
		Eventually(func() error {
			cp := on.Installation()
			cp.Spec.CalicoNetwork.BGP = ptr.To(operatorv1.BGPDisabled)
			return k8s.Update(ctx, cp, client.DryRunAll)
		}).Should(Succeed())
		poke("test/poke", "refused")
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
	})

	It("costs the peers of an agent that comes up late nothing, and counts one too late to probe as missing", func() {
		agents.Late("linux-2", time.Minute)
		on.CreateWR()
		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonNetworkProbeFailed))
		probe := on.WR().Status.Preflight.Probe
		Expect(probe.MissingReports).To(BeEquivalentTo(1), "linux-2 came up after its 30s round had ended")
		Expect(probe.FailingPairs).To(BeZero(), "pairs with the late node are not its peers' failing pairs")
		Expect(on.WR().Status.Message).To(ContainSubstring("1 nodes did not report (linux-2 (the agent came up 1m0s after its round began"))

		By("counting an agent that came up 20s into the round as on time: its peers still heard it, and it heard them")
		agents.Late("linux-2", 20*time.Second)
		poke(controllers.RerunPreflightAnnotation, "late")
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		probe = on.WR().Status.Preflight.Probe
		Expect(probe.PassedPairs).To(BeEquivalentTo(6))
		Expect(probe.FailingPairs).To(BeZero())
		Expect(probe.MissingReports).To(BeZero())
	})

	It("stalls with the API server's reason when its agents cannot be created, after a bounded number of tries", func() {
		probe := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "policy-check"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
					Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
		refuseDaemonSets("no-host-network", "!object.spec.template.spec.hostNetwork", "hostNetwork pods are not allowed in this cluster", probe)

		on.CreateWR()
		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonNetworkProbeFailed))
		Expect(on.WR().Status.Message).To(And(ContainSubstring("could not be started in 3 attempts"),
			ContainSubstring("hostNetwork pods are not allowed in this cluster")))
		Expect(look.CalicoWrites(op.writes.Snapshot())).To(BeEmpty(), "nothing was changed")
	})

	It("stops the pod network check as it stops the probe when the check's pods cannot be created, and runs it again when asked", func() {
		check := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: podcheck.Name},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
		lift := refuseDaemonSets("no-pod-check", "object.metadata.name != '"+podcheck.Name+"'", "pod network checks are not allowed in this cluster", check)

		on.CreateWR()
		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonPodNetworkCheckFailed))
		Expect(on.WR().Status.Message).To(And(
			ContainSubstring("pod network check before the first change could not be started in 3 attempts"),
			ContainSubstring("pod network checks are not allowed in this cluster"), ContainSubstring("Fix what the API server says"),
			ContainSubstring("kubectl winready rerun podcheck"),
			ContainSubstring("kubectl annotate wr default "+controllers.RerunPodCheckAnnotation)))
		Expect(on.WR().Status.Preflight.Probe.PassedPairs).To(BeNumerically(">", 0), "the probe before it passed")
		Expect(look.CalicoWrites(op.writes.Snapshot())).To(BeEmpty(), "nothing was changed")

		By("running again once the policy is gone and a rerun is asked for")
		lift()
		poke(controllers.RerunPodCheckAnnotation, "1")
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
	})
})

// refuseDaemonSets makes the API server refuse, in winready's namespaces
// only, to create DaemonSets for which expression does not hold, with
// message, until the spec ends or lift is called; sample, a DaemonSet in
// winready's namespace it refuses, shows when the API server has learnt the
// policy and when it has forgotten it.
func refuseDaemonSets(name, expression, message string, sample *appsv1.DaemonSet) (lift func()) {
	policy := denyPolicy(name, admissionv1.Create, admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
		Resources: []string{"daemonsets"}}, expression, message)
	// Bound to winready's namespaces only, so that nothing else is refused
	// while the API server forgets the policy after the spec.
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name",
					Operator: metav1.LabelSelectorOpIn, Values: []string{operatorNamespace, probeNamespace}}}}},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	refusal := func() string {
		if err := k8s.Create(ctx, sample, client.DryRunAll); err != nil {
			return err.Error()
		}
		return ""
	}
	lift = func() {
		for _, obj := range []client.Object{binding, policy} {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed())
		}
		Eventually(refusal).ShouldNot(ContainSubstring(message), "the API server forgets the policy")
	}
	// Registered before the objects exist: the next spec starts only once
	// the API server has forgotten the policy, which it learns from a watch.
	DeferCleanup(lift)
	for _, obj := range []client.Object{policy, binding} {
		Expect(k8s.Create(ctx, obj)).To(Succeed())
	}
	Eventually(refusal).Should(ContainSubstring(message))
	return lift
}

// denyPolicy is an admission policy that refuses op on rule's objects unless
// expression holds, with message.
func denyPolicy(name string, op admissionv1.OperationType, rule admissionv1.Rule, expression, message string) *admissionv1.ValidatingAdmissionPolicy {
	return &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{op}, Rule: rule}}}},
			Validations: []admissionv1.Validation{{Expression: expression, Message: message}},
		}}
}
