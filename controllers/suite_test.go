package controllers_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/securemetrics"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
	"github.com/winready/winready/test/kit/look"
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "WindowsReadiness controller")
}

// operatorNamespace is where the operator under test records the originals,
// and probeNamespace where it runs its probe rounds.
const (
	operatorNamespace = "winready-system"
	probeNamespace    = "winready-probe"
)

var (
	testEnv *kit.Env
	cfg     *rest.Config
	scheme  *runtime.Scheme
	k8s     client.Client // uncached: assertions never go through a cache
	// on reads and writes winready's objects with k8s (test/kit/look).
	on        look.Cluster
	sim       *calicosim.Simulator
	agents    *calicosim.ProbeAgents
	simCancel func()
)

// calicoCRDs are the Calico CRDs fetched by hack/calico-crds.sh.
var calicoCRDs = filepath.Join("..", "bin", "crds")

// long and longest start the specs of ten seconds and more (the longest a
// minute: every pass of it may fail) before the others, so that the suite's
// processes end together rather than one running such a spec alone at the
// end while the others wait: Ginkgo hands out higher priorities first.
var (
	long    = SpecPriority(1)
	longest = SpecPriority(2)
)

// core labels the core tier: the migration, the Windows join gate and a
// rollback, which make test-oldest runs (with the admission suite) on the
// oldest Kubernetes minor winready claims (internal/version.MinKubernetes).
var core = Label("core")

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// Rollouts of three simulated nodes take well under a second, and the
	// reference migration about four on an idle machine. Under make test's
	// three suites on two cores a whole migration with its four pod network
	// check rounds (2 to 6 s each there) was measured at 30 s in a
	// clean-clone run: the bound is a whole migration's under that load,
	// and only a spec that fails waits for it.
	SetDefaultEventuallyTimeout(time.Minute)
	// Each poll is a read past any cache: every 50 ms is soon enough for a
	// spec and spares the API server, which three suites share the cores with.
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(50 * time.Millisecond)
	SetDefaultConsistentlyDuration(300 * time.Millisecond)
	var err error
	testEnv, err = kit.Environment(kit.Options{CalicoCRDs: calicoCRDs})
	Expect(err).NotTo(HaveOccurred())
	auditLog = enableAudit(testEnv, GinkgoT().TempDir())
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	scheme, err = controllers.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	on = look.On(ctx, k8s)

	// The simulator plays the Tigera operator and the DaemonSet controller,
	// in a manager of its own, for the whole suite.
	// config/default is installed as users install it: namespaces, RBAC and
	// the admission policies (the CRD comes from envtest).
	installConfig()
	startSimulator()
})

var _ = AfterSuite(func() {
	stopSimulator()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// startSimulator runs the simulator in a manager of its own, in the
// background, as the Tigera operator runs beside winready.
func startSimulator() {
	simMgr, s, a, err := calicosim.NewManager(cfg, scheme, calicosim.Options{}, probeNamespace)
	Expect(err).NotTo(HaveOccurred())
	sim, agents = s, a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	simCancel = func() {
		cancel()
		Eventually(done).Should(BeClosed(), "the simulator stops")
	}
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(simMgr.Start(ctx)).To(Succeed())
	}()
	// Every kind the simulator watches, synced before a spec runs: a change
	// made before its controllers first see an object is taken for the
	// object's starting state (a calico-node template rolled out uncounted).
	for _, obj := range []client.Object{&operatorv1.Installation{}, &operatorv1.ImageSet{}, &corev1.ConfigMap{}, &corev1.Service{},
		&corev1.Pod{}, &corev1.Node{}, &corev1.ResourceQuota{}, &appsv1.DaemonSet{}, &calicov3.IPPool{},
		&calicov3.FelixConfiguration{}, &calicov3.IPAMConfiguration{}} {
		_, err := simMgr.GetCache().GetInformer(ctx, obj)
		Expect(err).NotTo(HaveOccurred())
	}
}

// stopSimulator stops the background simulator and waits until it has
// returned.
func stopSimulator() {
	if simCancel != nil {
		simCancel()
		simCancel = nil
	}
}

// operator is one run of winready's manager, as the production binary wires
// it, with a fake clock and a count of every write it makes.
type operator struct {
	clock  *clocktesting.FakeClock
	writes *metrics.WriteCounter
	cancel context.CancelFunc
	done   chan struct{}
}

// ctrlConfig lets several managers in one process register the same
// controller name, as a restarted operator does.
func ctrlConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

// operatorOptions vary a run of winready's manager.
type operatorOptions struct {
	// restCfg defaults to the suite's API server as an admin.
	restCfg *rest.Config
	// clock and writes carry over from a previous run to model a restart.
	clock  *clocktesting.FakeClock
	writes *metrics.WriteCounter
	// metricsAddr serves the metrics endpoint; empty disables it.
	metricsAddr string
	// metricsSecure serves it as installed (HTTPS, scrapers authorized by
	// the API server) rather than over plain HTTP.
	metricsSecure bool
	// flaky, when set, makes a share of the reconciler's requests fail.
	flaky *flakiness
}

// startOperator starts winready's manager; stop it with stop().
func startOperator(clock *clocktesting.FakeClock, writes *metrics.WriteCounter) *operator {
	return startOperatorWith(operatorOptions{clock: clock, writes: writes})
}

// startOperatorOn starts winready's manager against the API server of restCfg.
func startOperatorOn(restCfg *rest.Config, clock *clocktesting.FakeClock, writes *metrics.WriteCounter) *operator {
	return startOperatorWith(operatorOptions{restCfg: restCfg, clock: clock, writes: writes})
}

// startOperatorWith starts winready's manager wired by controllers.Setup, as internal/cli wires it,
// with a fake clock and a count of every write it makes.
func startOperatorWith(o operatorOptions) *operator {
	restCfg, clock, writes := o.restCfg, o.clock, o.writes
	if restCfg == nil {
		restCfg = cfg
	}
	if clock == nil {
		clock = clocktesting.NewFakeClock(time.Now())
	}
	if writes == nil {
		writes = metrics.NewWriteCounter(scheme)
	}
	metricsAddr := o.metricsAddr
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	opCfg := rest.CopyConfig(restCfg)
	opCfg.UserAgent = operatorUserAgent
	mgr, err := ctrl.NewManager(opCfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(probeNamespace),
		Metrics:                securemetrics.Options(metricsAddr, o.metricsSecure, ""),
		HealthProbeBindAddress: "0",
		Controller:             ctrlConfig(),
	})
	Expect(err).NotTo(HaveOccurred())
	r, err := controllers.Setup(mgr, controllers.Options{Namespace: operatorNamespace, ProbeNamespace: probeNamespace,
		ProbeImage: managerImage, Clock: clock,
		RetryBase: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	Expect(err).NotTo(HaveOccurred())
	var c client.Client
	c = mgr.GetClient()
	if o.flaky != nil {
		c = &flakyClient{Client: c, f: o.flaky}
		r.APIReader = &flakyReader{Reader: r.APIReader, f: o.flaky}
	}
	r.Client = client.WithFieldOwner(&metrics.CountingClient{Client: c, Writes: writes}, controllers.FieldOwner)
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{clock: clock, writes: writes, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(op.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return op
}

// stop stops the manager and waits until it has returned.
func (o *operator) stop() {
	o.cancel()
	Eventually(o.done).Should(BeClosed(), "the manager stops")
}
