// Package passes_test holds the pass-by-pass tier: what a pass of winready
// decides, given the cluster. Each spec seeds a cluster on this package's own
// control plane, then steps the simulated Calico and winready's reconciler
// by hand on a fake clock (bed_test.go): no manager, no informer, no
// workqueue and no wall-clock wait, so a spec proves the same thing on a
// loaded machine as on an idle one. A pass is woken through the manager's
// own watches and predicates (controllers.Watches), judged on each write
// (wakes_test.go). What needs the manager (that it runs those watches,
// timing, RBAC and admission, restarts, the audit log, races with the
// operator) is the controllers suite's.
package passes_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/controllers"
	"github.com/winready/winready/test/kit"
)

func TestPasses(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "winready pass by pass")
}

// The namespaces winready records its originals in and runs its probe
// rounds in, and the image it gives the probe's pods (never run here).
const (
	operatorNamespace = "winready-system"
	probeNamespace    = "winready-probe"
	probeImage        = "winready:test"
)

var (
	ctx     = context.Background()
	testEnv *kit.Env
	cfg     *rest.Config
	scheme  *runtime.Scheme
)

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// Nothing here waits on wall-clock time but the control plane's start and
	// a spec's clean-up.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	var err error
	testEnv, err = kit.Environment(kit.Options{CalicoCRDs: filepath.Join("..", "..", "bin", "crds")})
	Expect(err).NotTo(HaveOccurred())
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(testEnv.Stop)
	scheme, err = controllers.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	api, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	for _, ns := range []string{operatorNamespace, probeNamespace} {
		err := api.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
})
