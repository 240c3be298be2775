package calicosim_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
)

var (
	testEnv *kit.Env
	cfg     *rest.Config
	// k8s reads straight from the API server: assertions never look at a cache.
	k8s client.Client
)

func TestCalicoSim(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "calicosim")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root := filepath.Join("..", "..")
	var err error
	testEnv, err = kit.Environment(kit.Options{CalicoCRDs: filepath.Join(root, "bin", "crds"), NoWinreadyCRD: true})
	Expect(err).NotTo(HaveOccurred())
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: calico.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// startSimulator runs a simulator on a manager of its own until the spec ends.
func startSimulator(opts calicosim.Options) *calicosim.Simulator {
	GinkgoHelper()
	sim, _ := runSimulator(opts)
	return sim
}

// startStoppableSimulator is startSimulator for a spec that stops the simulator itself (it is stopped at the
// end of the spec in any case).
func startStoppableSimulator(opts calicosim.Options) (stop func()) {
	GinkgoHelper()
	_, stop = runSimulator(opts)
	return stop
}

func runSimulator(opts calicosim.Options) (*calicosim.Simulator, func()) {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  calico.NewScheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	Expect(err).NotTo(HaveOccurred())
	sim := calicosim.New(opts)
	Expect(sim.SetupWithManager(mgr)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			Eventually(done).WithTimeout(30*time.Second).Should(Receive(BeNil()), "the simulator's manager stops cleanly")
		})
	}
	DeferCleanup(stop)
	return sim, stop
}
