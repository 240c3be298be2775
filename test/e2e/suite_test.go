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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/gate"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/test/install"
)

const operatorNamespace = "winready-system"

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
	ctx           = context.Background()
	scheme        *runtime.Scheme
	cfg           *rest.Config
	k8s           client.Client
	calicoBackend backend
	logDir        string
	winready      *process
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
	for _, ns := range []string{operatorNamespace, preflight.DefaultProbeNamespace} {
		Expect(ensureNamespace(ctx, k8s, ns)).To(Succeed())
	}
	// The Windows join gate ships in config/admission, as users install it.
	admission, err := install.Build(filepath.Join(repoRoot, "config", "admission"))
	Expect(err).NotTo(HaveOccurred())
	Expect(install.Create(ctx, k8s, admission, install.Named(gate.Name))).To(Succeed())

	// The production binary, from outside the cluster, as a user of its own.
	bin := os.Getenv("WINREADY_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot, "bin", "winready")
	}
	env := envOf(calicoBackend)
	user, err := env.AddUser(envtest.User{Name: "winready", Groups: []string{"system:masters"}}, cfg)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(logDir, "winready.kubeconfig")
	Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	args := []string{"--kubeconfig", path, "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--namespace", operatorNamespace,
		"--probe-image", "winready:e2e"}
	// E2E_WINREADY_ARGS adds flags, e.g. --zap-log-level=2 for the waits.
	args = append(args, strings.Fields(os.Getenv("E2E_WINREADY_ARGS"))...)
	winready, err = startProcess("winready", logDir, nil, bin, args...)
	Expect(err).NotTo(HaveOccurred(), "run make build first")
})

var _ = AfterSuite(func() {
	if winready != nil {
		Expect(winready.Stop()).To(Succeed())
	}
	if calicoBackend != nil {
		Expect(calicoBackend.Stop()).To(Succeed())
	}
	GinkgoWriter.Printf("logs of the processes: %s\n", logDir)
})

// envOf is the envtest environment a backend runs its control plane with.
func envOf(b backend) *envtest.Environment {
	switch t := b.(type) {
	case *simBackend:
		return t.env
	case *realBackend:
		return t.env
	}
	return nil
}
