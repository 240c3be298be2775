package controllers_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
	installpkg "github.com/winready/winready/test/install"
	"github.com/winready/winready/test/kit/look"
)

// install is config/default as kustomize builds it.
func install() []*unstructured.Unstructured {
	objs, err := installpkg.Build("../config/default")
	Expect(err).NotTo(HaveOccurred())
	return objs
}

func ensureNamespace(name string) {
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

var _ = Describe("Operating winready", func() {
	var op *operator

	AfterEach(func() {
		resetCluster(op)
		op = nil
	})

	It("reads as InProgress while migrating, Current when Ready and Failed when Stalled to kstatus", func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
		Expect(on.KStatus()).To(Equal(status.InProgressStatus), "paused")

		sim.HoldRollouts()
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(func() string { return on.Step(v1alpha1.StepBGP)().Message }).Should(ContainSubstring("rollout"))
		Expect(on.Phase()).To(Equal(v1alpha1.PhaseMigrating))
		Expect(on.KStatus()).To(Equal(status.InProgressStatus), "migrating")

		sim.ReleaseRollouts()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Expect(on.KStatus()).To(Equal(status.CurrentStatus), "ready")

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.KStatus).Should(Equal(status.InProgressStatus), "rolling back")
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack))
		Expect(on.KStatus()).To(Equal(status.CurrentStatus), "rolled back")

		By("a stall")
		on.LiftGate()
		Eventually(func() error { return k8s.Create(ctx, look.WindowsNode("win-1")) }).Should(Succeed())
		DeferCleanup(deleteNode, "win-1")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseStalled))
		Expect(on.KStatus()).To(Equal(status.FailedStatus), "stalled")
	})

	It("reports in status.observedGeneration every generation it has read, also while paused", func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.RequireApproval = true })
		Eventually(func() bool {
			wr := on.WR()
			return wr.Generation == 2 && wr.Status.ObservedGeneration == 2
		}).Should(BeTrue(), "a paused pass read generation 2")
		Expect(on.Phase()).To(Equal(v1alpha1.PhasePaused))
	})

	It("serves the phase, step durations, failing pairs and a blocked gauge on the metrics endpoint", func() {
		cl := calicosim.MainCluster()
		Expect(calicosim.Seed(ctx, k8s, cl)).To(Succeed())
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String()
		Expect(l.Close()).To(Succeed())
		op = startOperatorWith(operatorOptions{metricsAddr: addr})
		scrape := func() string {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Eventually(scrape).Should(And(
			ContainSubstring(`winready_phase{phase="Ready"} 1`),
			ContainSubstring(`winready_phase{phase="Migrating"} 0`),
			MatchRegexp(`winready_step_duration_seconds_count\{direction="Migrate",step="BGP"\} [1-9]`),
			ContainSubstring(`winready_api_writes_total{kind="Installation",verb="patch"}`),
			ContainSubstring(`winready_preflight_failing_pairs 0`),
		))
		Expect(scrape()).NotTo(ContainSubstring(`winready_blocked{`))

		By("a blocked migration")
		on.DeleteWR()
		// The record of the first migration goes with the cluster it
		// recorded: a new WindowsReadiness would take it for a foreign one.
		Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: record.Name}})).To(Succeed())
		Expect(calicosim.Clean(ctx, k8s)).To(Succeed())
		cl.Pools[0].Encapsulation = operatorv1.EncapsulationIPIP
		Expect(calicosim.Seed(ctx, k8s, cl)).To(Succeed())
		on.CreateWR()
		Eventually(scrape).Should(ContainSubstring(`winready_blocked{reason="PreflightFailed"} 1`))
	})

	It("runs the manager under the restricted Pod Security Standard, and the probe agents only where privileged is allowed", func() {
		for _, level := range []string{"restricted", "privileged"} {
			ensure := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pss-" + level,
				Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}}}
			if err := k8s.Create(ctx, ensure); !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
		var manager *appsv1.Deployment
		for _, obj := range install() {
			if obj.GetKind() == "Deployment" {
				manager = &appsv1.Deployment{}
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, manager)).To(Succeed())
			}
		}
		Expect(manager).NotTo(BeNil())
		podIn := func(ns string, spec corev1.PodSpec) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pss-check"}, Spec: spec}
		}
		Expect(k8s.Create(ctx, podIn("pss-restricted", manager.Spec.Template.Spec), client.DryRunAll)).To(Succeed(),
			"the manager meets restricted")

		agents := round.DaemonSet(probe.RoundKind, probeNamespace, managerImage, "r", nil)
		err := k8s.Create(ctx, podIn("pss-restricted", agents.Spec.Template.Spec), client.DryRunAll)
		Expect(err).To(HaveOccurred(), "the agents need exceptions")
		for _, exception := range []string{"host namespaces", "NET_RAW", "runAsNonRoot"} {
			Expect(err.Error()).To(ContainSubstring(exception))
		}
		Expect(strings.Count(err.Error(), "privileged")).To(BeZero(), "no privileged container")
		Expect(k8s.Create(ctx, podIn("pss-privileged", agents.Spec.Template.Spec), client.DryRunAll)).To(Succeed())
	})
})

var _ = Describe("Working with people and GitOps", func() {
	var op *operator

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
	})

	AfterEach(func() { resetCluster(op) })

	It("stops fighting a GitOps tool that keeps putting a value back, naming it and the YAML to commit", func() {
		on.CreateWR()
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		argo, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		argo = client.WithFieldOwner(argo, "argocd-controller")
		revert := func() {
			patch := []byte(`{"spec":{"calicoNetwork":{"bgp":"Enabled"}}}`)
			Expect(argo.Patch(ctx, on.Installation(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		}
		for i := 1; i <= 2; i++ {
			revert()
			Eventually(func() int32 { return on.Step(v1alpha1.StepBGP)().Reverts }).Should(BeEquivalentTo(i))
			Eventually(func() *operatorv1.BGPOption { return on.Installation().Spec.CalicoNetwork.BGP }).
				Should(HaveValue(Equal(operatorv1.BGPDisabled)), "winready applies it again")
			Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		}
		revert()
		Eventually(on.Condition(conditions.Stalled)).Should(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonConflictingManager))
		msg := on.Condition(conditions.Stalled)().Message
		Expect(msg).To(ContainSubstring(`field manager "argocd-controller" keeps putting back what step BGP changes (3 times)`))
		Expect(msg).To(ContainSubstring("spec:\n  calicoNetwork:\n    bgp: Disabled\n"))
		Consistently(func() *operatorv1.BGPOption { return on.Installation().Spec.CalicoNetwork.BGP }).
			Should(HaveValue(Equal(operatorv1.BGPEnabled)), "no more fighting")

		By("counting each revert once, however many passes see it")
		for i := range 3 {
			poke("winready.io/test-nudge", fmt.Sprint(i))
		}
		Consistently(func() int32 { return on.Step(v1alpha1.StepBGP)().Reverts }).Should(BeEquivalentTo(3))
		Expect(on.Condition(conditions.Stalled)().Message).To(ContainSubstring("(3 times)"))
	})
})
