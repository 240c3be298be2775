package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
)

// earlierRevision is the winready a running migration is upgraded from: a
// release tag once there is one, until then the commit whose records lack
// calico-node's own API server address (E2E_EARLIER overrides it).
const earlierRevision = "f27ae92"

// checkoutAt checks rev out of the repository's history as a git worktree
// (a clone with full history is needed; the chart's generator reads the
// commit there) and builds its binary; it returns the binary and the
// checkout, whose config/default is that release's manifest. The worktree
// goes when the calling container ends.
func checkoutAt(rev string) (bin, root string) {
	GinkgoHelper()
	root = filepath.Join(logDir, "winready-"+rev)
	out, err := exec.Command("git", "-C", repoRoot, "worktree", "add", "--detach", root, rev).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "checking out %s (a clone with full history is needed): %s", rev, out)
	DeferCleanup(func() {
		out, err := exec.Command("git", "-C", repoRoot, "worktree", "remove", "--force", root).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "removing the worktree %s: %s", root, out)
	})
	bin = filepath.Join(root, "winready")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	out, err = build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building winready %s: %s", rev, out)
	return bin, root
}

// nodeEnv is calico-node's API server address: its KUBERNETES_SERVICE_HOST
// and _PORT, which the services endpoint sets and a rollback restores.
func nodeEnv() [2]string {
	return [2]string{daemonSetEnv(calico.NodeDaemonSet, calico.ServiceHostKey), daemonSetEnv(calico.NodeDaemonSet, calico.ServicePortKey)}
}

// runTodayAsInstalled installs today's winready again and runs it, as the
// other scenarios expect to find it after one that ran winready itself.
func runTodayAsInstalled(name string) {
	GinkgoHelper()
	objs, err := manifestOf(repoRoot)
	Expect(err).NotTo(HaveOccurred())
	manager, err = installWinready(ctx, k8s, objs)
	Expect(err).NotTo(HaveOccurred())
	winready, err = runAsInstalled(ctx, k8s, cfg, manager, name, winreadyBin(),
		strings.Fields(os.Getenv("E2E_WINREADY_ARGS"))...)
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("Upgrading winready in the middle of a migration", Ordered, func() {
	var original touched
	var originalEnv [2]string
	var earlierBin, earlierRoot string
	var running *process

	BeforeAll(func() {
		rev := earlierRevision
		if r := os.Getenv("E2E_EARLIER"); r != "" {
			rev = r
		}
		earlierBin, earlierRoot = checkoutAt(rev)
		// This scenario runs the two releases itself.
		Expect(winready.Stop()).To(Succeed())
		// The earlier release shipped no admission policies: the cluster it
		// ran in had none of today's, which bound a manager that claims what
		// it writes. Today's come back with today's manifest, as an upgrade
		// applies them.
		for _, obj := range []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicyBinding{},
			&admissionregistrationv1.ValidatingAdmissionPolicy{}} {
			Expect(k8s.DeleteAllOf(ctx, obj, client.MatchingLabels{"app.kubernetes.io/part-of": "winready"})).To(Succeed())
		}
		Expect(calicoBackend.Seed(ctx, k8s, mainCluster())).To(Succeed())
		original, originalEnv = touchedFields(), nodeEnv()
		Expect(original.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)), "the scenario starts from the seed")
	})

	AfterAll(func() {
		leaveAsFound()
		Expect(running.Stop()).To(Succeed())
		runTodayAsInstalled("winready-after-upgrade-scenario")
	})

	It("migrates with the earlier release until BGP is off", func() {
		objs, err := manifestOf(earlierRoot)
		Expect(err).NotTo(HaveOccurred())
		earlier, err := installWinready(ctx, k8s, objs)
		Expect(err).NotTo(HaveOccurred())
		running, err = runAsInstalled(ctx, k8s, cfg, earlier, "winready-earlier", earlierBin)
		Expect(err).NotTo(HaveOccurred())
		// The probe is not what this scenario is about; the earlier release
		// knows no pod network check.
		wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
			Spec: v1alpha1.WindowsReadinessSpec{Preflight: v1alpha1.PreflightSpec{SkipNetworkProbe: true}}}
		Expect(k8s.Create(ctx, wr)).To(Succeed())
		Eventually(func() *operatorv1.BGPOption { return on.Installation().Spec.CalicoNetwork.BGP }).
			Should(HaveValue(Equal(operatorv1.BGPDisabled)), why)
		Expect(running.Stop()).To(Succeed())
	})

	It("finishes after the upgrade, then rolls back to exactly what was there", func() {
		objs, err := manifestOf(repoRoot)
		Expect(err).NotTo(HaveOccurred())
		manager, err = installWinready(ctx, k8s, objs)
		Expect(err).NotTo(HaveOccurred())
		// Fields the earlier CRD did not know are set now, as a team would
		// after the upgrade: no pod runs on kwok nodes for the pod check.
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.PodNetworkCheck.Disabled = skipProbe() })
		running, err = runAsInstalled(ctx, k8s, cfg, manager, "winready-upgraded", winreadyBin())
		Expect(err).NotTo(HaveOccurred())
		By("stopping on the originals the earlier release kept in the status alone, until a person acknowledges them")
		Eventually(on.Condition(conditions.OriginalsRecorded)).Should(And(
			HaveField("Reason", conditions.ReasonForeignRecord), HaveField("Message", ContainSubstring("status.originals"))), why)
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.Acknowledge = append(wr.Spec.Preflight.Acknowledge, v1alpha1.AcknowledgeForeignRecord)
		})
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseReady), why)

		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack), why)
		Expect(touchedFields()).To(Equal(original))
		By("running calico-node with the API server address it had before, which the earlier record did not hold")
		Expect(nodeEnv()).To(Equal(originalEnv))
		Eventually(healthy).Should(Succeed())
	})
})
