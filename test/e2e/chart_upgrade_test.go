package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/record"
)

// previousChartRevision is the winready whose chart a running migration is
// upgraded from with helm upgrade: a release tag once there is one, until
// then the last commit whose build passed CI (E2E_PREVIOUS_CHART overrides
// it).
const previousChartRevision = "d8ec3d8"

// helmCLI runs test/chart's helm command, the Helm SDK's install, upgrade
// and uninstall, against the suite's API server as cluster-admin.
type helmCLI struct{ bin, kubeconfig string }

// newHelm builds the command into the log directory and writes a kubeconfig
// of the suite's own credentials for it.
func newHelm() helmCLI {
	GinkgoHelper()
	h := helmCLI{bin: filepath.Join(logDir, "helm")}
	build := exec.Command("go", "build", "-o", h.bin, "./cmd/helm")
	build.Dir = filepath.Join(repoRoot, "test", "chart")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building test/chart's helm command: %s", out)
	h.kubeconfig, err = writeKubeconfig(cfg, "helm", &clientcmdapi.AuthInfo{Token: cfg.BearerToken,
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData})
	Expect(err).NotTo(HaveOccurred())
	return h
}

// run runs one helm command and returns what it printed.
func (h helmCLI) run(args ...string) string {
	GinkgoHelper()
	out, err := h.try(args...)
	Expect(err).NotTo(HaveOccurred(), "helm %s: %s", strings.Join(args, " "), out)
	return out
}

// try runs one helm command and returns what it printed and how it ended.
func (h helmCLI) try(args ...string) (string, error) {
	cmd := exec.Command(h.bin, append([]string{"-kubeconfig", h.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("helm %s: %s", args[0], out)
	return string(out), err
}

// chartManager is the manager Deployment a helm install or upgrade left,
// running the values' image.
func chartManager() *appsv1.Deployment {
	GinkgoHelper()
	dep := &appsv1.Deployment{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: manager.Namespace, Name: managerDeployment}, dep)).To(Succeed())
	Expect(dep.Spec.Template.Spec.Containers).To(ContainElement(And(HaveField("Name", "manager"),
		HaveField("Image", HavePrefix(chartMirror+"@sha256:")))), "the chart's values set the manager's image")
	return dep
}

var _ = Describe("Upgrading and reinstalling winready's Helm chart in the middle of a migration", Ordered, func() {
	var (
		helm                 helmCLI
		previousBin          string
		previousChart, chart string
		original             touched
		originalEnv          [2]string
		running              *process
		values               string
	)
	// awaiting is the step the migration waits to have approved, "" while
	// it waits for none.
	awaiting := func() v1alpha1.StepName {
		wr := on.WR()
		if wr.Status.Phase != v1alpha1.PhaseAwaitingApproval {
			return ""
		}
		for _, s := range wr.Status.Steps {
			if s.State == v1alpha1.StepPending {
				return s.Name
			}
		}
		return ""
	}
	// crdOwner is the Helm release and the manager of the CRD.
	crdOwner := func() string {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "windowsreadinesses.winready.io"}, crd)).To(Succeed())
		return crd.Annotations["meta.helm.sh/release-name"] + " " + crd.Labels["app.kubernetes.io/managed-by"]
	}

	BeforeAll(func() {
		rev := previousChartRevision
		if r := os.Getenv("E2E_PREVIOUS_CHART"); r != "" {
			rev = r
		}
		var previousRoot string
		previousBin, previousRoot = checkoutAt(rev)
		dir := filepath.Join(logDir, "chart-upgrade")
		var err error
		previousChart, err = buildChart(previousRoot, filepath.Join(dir, "previous"))
		Expect(err).NotTo(HaveOccurred())
		chart, err = buildChart(repoRoot, filepath.Join(dir, "current"))
		Expect(err).NotTo(HaveOccurred())
		helm = newHelm()
		values = filepath.Join(dir, "values.yaml")
		Expect(os.WriteFile(values, mirrorValues, 0o644)).To(Succeed())

		// This scenario runs winready itself, from the charts.
		Expect(winready.Stop()).To(Succeed())
		Expect(calicoBackend.Seed(ctx, k8s, mainCluster())).To(Succeed())
		original, originalEnv = touchedFields(), nodeEnv()
		Expect(original.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)), "the scenario starts from the seed")
	})

	AfterAll(func() {
		leaveAsFound()
		if running != nil {
			Expect(running.Stop()).To(Succeed())
		}
		// The release goes: the one the last spec installed, or none when
		// a spec failed before.
		if out, err := helm.try("uninstall"); err != nil {
			GinkgoWriter.Printf("helm uninstall after the scenario: %v %s", err, out)
		}
		runTodayAsInstalled("winready-after-chart-scenario")
	})

	It("migrates with the previous release's chart until a step waits for approval", func() {
		// The suite installed winready with kubectl's server-side apply: the
		// chart takes those objects over, as a team moving to Helm does.
		helm.run("install", "-take-ownership", "-f", values, previousChart)
		var err error
		running, err = runAsInstalled(ctx, k8s, cfg, chartManager(), "winready-earlier-chart", previousBin)
		Expect(err).NotTo(HaveOccurred())
		// Two disruptive steps left to approve, so that each release stops
		// at a place of its own.
		wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
			Spec: v1alpha1.WindowsReadinessSpec{
				Preflight: v1alpha1.PreflightSpec{SkipNetworkProbe: true},
				// Off on both backends: the probe policy compares the check's
				// agents with the manager Deployment's image, which the API
				// server's admission reads from its own informer, and this
				// suite starts the manager within milliseconds of Helm's
				// change of that image, sooner than any pod starts.
				PodNetworkCheck: v1alpha1.PodNetworkCheckSpec{Disabled: true},
				RequireApproval: true, ApprovedSteps: []v1alpha1.StepName{v1alpha1.StepEncapsulation}}}
		Expect(k8s.Create(ctx, wr)).To(Succeed())
		Eventually(awaiting).Should(Equal(v1alpha1.StepBGP), why)
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPEnabled)), "BGP waits for its approval")
		Expect(running.Stop()).To(Succeed())
		running = nil
	})

	It("upgrades to this chart with helm upgrade, CRD included, and goes on from where the previous release stopped", func() {
		helm.run("upgrade", "-f", values, chart)
		Expect(crdOwner()).To(Equal("winready Helm"), "the CRD is the release's, upgraded with it")
		var err error
		running, err = runAsInstalled(ctx, k8s, cfg, chartManager(), "winready-chart-upgraded", winreadyBin())
		Expect(err).NotTo(HaveOccurred())
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = append(wr.Spec.ApprovedSteps, v1alpha1.StepBGP)
		})
		Eventually(awaiting).Should(Equal(v1alpha1.StepServicesEndpoint), why)
		Expect(on.Installation().Spec.CalicoNetwork.BGP).To(HaveValue(Equal(operatorv1.BGPDisabled)))
	})

	It("keeps the record of the originals through helm uninstall mid-way, and the next install rolls back to exactly what was there", func() {
		Expect(running.Stop()).To(Succeed())
		running = nil
		out := helm.run("uninstall")
		Expect(out).To(ContainSubstring("kept due to the resource policy"))
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: manager.Namespace, Name: managerDeployment}, &appsv1.Deployment{})).
			NotTo(Succeed(), "the manager went with the release")
		rec := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: manager.Namespace, Name: record.Name}, rec)).To(Succeed(),
			"the record of the originals outlives the release")
		Expect(rec.DeletionTimestamp).To(BeNil())
		Expect(on.WR().Status.Phase).To(Equal(v1alpha1.PhaseAwaitingApproval), "the WindowsReadiness and its CRD stay")

		helm.run("install", "-f", values, chart)
		var err error
		running, err = runAsInstalled(ctx, k8s, cfg, chartManager(), "winready-chart-reinstalled", winreadyBin())
		Expect(err).NotTo(HaveOccurred())
		on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		Eventually(on.Phase).Should(Equal(v1alpha1.PhaseRolledBack), why)
		Expect(touchedFields()).To(Equal(original))
		Expect(nodeEnv()).To(Equal(originalEnv))
		Eventually(healthy).Should(Succeed())
	})
})
