// Package e2e runs winready's production binary, from outside the cluster
// with a kubeconfig, through the scenarios a platform team goes through,
// against a backend that plays Calico: the simulator (E2E_BACKEND=sim, the
// default, part of make test) or the real Tigera operator v1.43.0 with a
// controller manager, a scheduler and kwok (E2E_BACKEND=real, make e2e).
// One scenario definition, two backends: every difference is a simulator bug.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/controllers"
	"github.com/winready/winready/test/kit/look"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "winready end to end ("+backendName()+")")
}

func backendName() string {
	if b := os.Getenv("E2E_BACKEND"); b != "" {
		return b
	}
	return "sim"
}

var (
	ctx    = context.Background()
	scheme *runtime.Scheme
	cfg    *rest.Config
	k8s    client.Client
	// on reads and writes winready's objects with k8s (test/kit/look).
	on            look.Cluster
	calicoBackend backend
	logDir        string
	winready      *process
	// manager is the Deployment the installed manifest runs winready with.
	manager *appsv1.Deployment
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(3 * time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	var err error
	scheme, err = controllers.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	logDir = os.Getenv("E2E_LOG_DIR")
	if logDir == "" {
		logDir = GinkgoT().TempDir()
	}
	switch backendName() {
	case "real":
		calicoBackend = &realBackend{scheme: scheme, logDir: logDir}
	default:
		calicoBackend = &simBackend{scheme: scheme}
	}
	cfg, err = calicoBackend.Start(ctx)
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	on = look.On(ctx, k8s)
	// winready as a platform team installs it: the manifest applied, then
	// the production binary run as the manifest's Deployment runs it, under
	// its ServiceAccount. A rule missing from the manifest fails here.
	objs, err := manifestOf(repoRoot)
	Expect(err).NotTo(HaveOccurred())
	manager, err = installWinready(ctx, k8s, objs)
	Expect(err).NotTo(HaveOccurred())
	// E2E_WINREADY_ARGS adds flags, e.g. --zap-log-level=2 for the waits.
	winready, err = runAsInstalled(ctx, k8s, cfg, manager, "winready", winreadyBin(), strings.Fields(os.Getenv("E2E_WINREADY_ARGS"))...)
	Expect(err).NotTo(HaveOccurred(), "run make build first")
})

// winreadyBin is the production binary under test.
func winreadyBin() string {
	if bin := os.Getenv("WINREADY_BIN"); bin != "" {
		return bin
	}
	return filepath.Join(repoRoot, "bin", "winready")
}

// A failed spec's report carries the end of winready's log: the suite's log
// directory is a temporary one, gone with the run.
var _ = ReportAfterEach(func(report SpecReport) {
	if report.Failed() && winready != nil {
		AddReportEntry("winready", winready.tail(40))
	}
})

var _ = AfterSuite(func() {
	if winready != nil {
		Expect(winready.Stop()).To(Succeed())
	}
	if calicoBackend != nil {
		Expect(calicoBackend.Stop()).To(Succeed())
	}
	GinkgoWriter.Printf("logs of the processes: %s\n", logDir)
	// Some of the manager's requests only log a refusal (its Events, say):
	// every run of today's winready, under the manifest's RBAC, had none.
	Expect(forbiddenInLogs()).To(BeEmpty(), "requests of winready the manifest's RBAC refused")
})

// forbiddenInLogs lists the lines of today's winready's logs (not the
// earlier release's, which ran under its own manifest) that report a request
// the API server refused for want of a rule.
func forbiddenInLogs() []string {
	logs, err := filepath.Glob(filepath.Join(logDir, "winready*.log"))
	Expect(err).NotTo(HaveOccurred())
	var refused []string
	for _, path := range logs {
		if strings.HasPrefix(filepath.Base(path), "winready-earlier") {
			continue
		}
		data, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "is forbidden") {
				refused = append(refused, filepath.Base(path)+": "+line)
			}
		}
	}
	return refused
}
