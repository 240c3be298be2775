package controllers_test

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

var _ = Describe("The Windows join gate", core, func() {
	var op *operator

	BeforeEach(func() {
		seed(calicosim.MainCluster())
		op = startOperator(nil, nil)
	})

	AfterEach(func() { resetCluster(op) })

	// A dry run goes through admission without creating the node, so a
	// rejection can be waited for without leaving a node behind.
	wouldAdmit := func() error { return k8s.Create(ctx, look.WindowsNode("win-1"), client.DryRunAll) }
	createWindowsNode := func() error { return k8s.Create(ctx, look.WindowsNode("win-1")) }

	It("rejects a Windows node before Ready and during a rollback, and admits it when Ready", func() {
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
		Eventually(wouldAdmit).Should(MatchError(And(
			ContainSubstring("not ready for Windows nodes yet"),
			ContainSubstring("has not rolled out the Windows dataplane"))))
		Expect(createWindowsNode()).NotTo(Succeed())
		Expect(k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "linux-9",
			Labels: map[string]string{calico.OSLabel: "linux"}}})).To(Succeed(), "Linux nodes are not gated")
		DeferCleanup(deleteNode, "linux-9")

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Eventually(wouldAdmit).Should(Succeed(), "the gate is gone once Ready")
		Expect(createWindowsNode()).To(Succeed())
		deleteNode("win-1")

		// Paused, the rollback reverts nothing, so the Installation's half of
		// the gate still passes and the denial is the WindowsReadiness's own.
		// Unpaused, the first revert (the Windows dataplane) closes the
		// Installation's half too, and either half's message may come first.
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Direction = v1alpha1.DirectionRollback
			wr.Spec.Paused = true
		})
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
		Eventually(wouldAdmit).Should(MatchError(ContainSubstring("not ready for Windows nodes (WindowsReadiness default has spec.direction: Rollback)")))
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack))
		Eventually(wouldAdmit).Should(MatchError(ContainSubstring("not ready for Windows nodes")))
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
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
		Eventually(wouldAdmit).Should(MatchError(ContainSubstring("not ready for Windows nodes yet")))
		Expect(relabel("linux-0")()).To(MatchError(ContainSubstring("not ready for Windows nodes yet")),
			"the gate is evaluated on the status subresource too")

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = false })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady))
		Eventually(relabel("linux-0")).Should(Succeed(), "the gate is open once Ready")
		Expect(createWindowsNode()).To(Succeed())
		DeferCleanup(deleteNode, "win-1")

		By("closing the gate again with a rollback, under an admitted Windows node")
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(relabel("linux-0")).Should(MatchError(ContainSubstring("not ready for Windows nodes (WindowsReadiness default has spec.direction: Rollback)")))
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
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
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
			_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join("..", "config", "crd", "bases")}})
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

	It("admits Windows nodes when switched off in the spec and on the Installation", func() {
		on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Paused = true
			wr.Spec.WindowsNodeGate = v1alpha1.GateDisabled
		})
		Eventually(on.Phase).Should(Equal(v1alpha1.PhasePaused))
		Eventually(wouldAdmit).Should(MatchError(ContainSubstring("winready-windows-node-gate-calico")),
			"the spec lifts only the half that reads it")
		on.LiftGate()
		Eventually(wouldAdmit).Should(Succeed())
		Consistently(wouldAdmit).Should(Succeed())
	})
})
