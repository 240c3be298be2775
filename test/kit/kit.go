package kit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/winready/winready/config/crd"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
)

// CalicoCRDsEnv names the environment variable Options.CalicoCRDs defaults to.
const CalicoCRDsEnv = "WINREADY_CALICO_CRDS"

// APIServerFlagsEnv names the environment variable whose kube-apiserver
// flags, "--name=value" separated by spaces, every control plane of
// Environment gets. winready's make test sets --watch-cache=false: its
// control planes serve every read from etcd, as a cluster's API server may,
// for a fifth less of their CPU (a cluster's watch cache serves thousands
// of clients; a suite's, a handful). A suite's own flags, set on the
// environment after Environment returns, win.
const APIServerFlagsEnv = "WINREADY_ENVTEST_APISERVER_FLAGS"

// Namespace is where winready runs and keeps the record of the originals,
// as config/default installs it; its probe rounds run in
// round.DefaultNamespace.
const Namespace = "winready-system"

// controlPlaneStartTimeout bounds the start of kube-apiserver and of etcd
// unless KUBEBUILDER_CONTROLPLANE_START_TIMEOUT says otherwise.
const controlPlaneStartTimeout = 2 * time.Minute

// DefaultTimeout bounds each wait of a Cluster when Options.Timeout is zero.
const DefaultTimeout = 3 * time.Minute

// Options say what to start. Every field is optional but Seed.
type Options struct {
	// Seed is the cluster's YAML: the Installation "default" and any other
	// objects (see the package documentation).
	Seed []byte
	// Nodes are the cluster's nodes; empty means three Linux nodes, linux-0
	// to linux-2 at 10.0.0.11 to 10.0.0.13.
	Nodes []Node
	// CalicoCRDs is the directory of Calico's CRDs; empty means the
	// environment variable WINREADY_CALICO_CRDS.
	CalicoCRDs string
	// ControlPlane is the directory of kube-apiserver and etcd; empty means
	// the environment variable KUBEBUILDER_ASSETS.
	ControlPlane string
	// Timeout bounds each wait of the Cluster's methods when their context
	// has no deadline of its own; zero means DefaultTimeout.
	Timeout time.Duration
	// CalicoCRDSet says which of Calico's CRDs the control plane has; zero
	// means all of them. Environment reads it; New needs all of them.
	CalicoCRDSet CalicoCRDSet
	// NoWinreadyCRD leaves winready's own CRD out of the control plane, as in
	// a cluster where winready is not installed. Environment reads it; New
	// needs the CRD.
	NoWinreadyCRD bool
	// CRDDirectories are directories of further CRDs the control plane
	// installs, besides winready's and Calico's; each must exist.
	CRDDirectories []string
	// Snapshots is a directory where the kit keeps etcd's data once a set of
	// CRDs is installed, for each set and control plane binaries: a control
	// plane then starts from a copy of it rather than installing its CRDs
	// (see Env). Empty means the environment variable
	// WINREADY_ENVTEST_SNAPSHOTS; when both are empty, every control plane
	// installs its CRDs.
	Snapshots string
}

// CalicoCRDSet says which of Calico's CRDs a control plane has.
type CalicoCRDSet int

const (
	// AllCalicoCRDs are the operator.tigera.io CRDs (operator/ of
	// Options.CalicoCRDs) and Calico's own (calico/): a Calico cluster as the
	// Tigera operator installs it.
	AllCalicoCRDs CalicoCRDSet = iota
	// OperatorCRDsOnly are the operator.tigera.io CRDs alone, from operator/
	// of Options.CalicoCRDs: a cluster where Calico's own API is not served.
	OperatorCRDsOnly
	// NoCalicoCRDs are none of Calico's CRDs: a control plane without Calico.
	// Neither Options.CalicoCRDs nor WINREADY_CALICO_CRDS is read.
	NoCalicoCRDs
)

// T is what Start needs of a test: *testing.T, *testing.B and Ginkgo's
// GinkgoT() all have it.
type T interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Start is New for a test: it fails the test when the cluster cannot start,
// and stops the cluster when the test ends.
func Start(t T, opts Options) *Cluster {
	t.Helper()
	c, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("kit: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("kit: stopping: %v", err)
		}
	})
	return c
}

// New starts the control plane, seeds the cluster, and runs the simulated
// Tigera operator and winready's reconciler until Stop. It returns once the
// seeded cluster is at rest. ctx bounds the start only.
func New(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.NoWinreadyCRD || opts.CalicoCRDSet != AllCalicoCRDs {
		return nil, errors.New("a Cluster needs winready's CRD and all of Calico's: " +
			"Options.NoWinreadyCRD and Options.CalicoCRDSet are for Environment")
	}
	seed, err := parseSeed(opts.Seed)
	if err != nil {
		return nil, err
	}
	env, err := environment(opts)
	if err != nil {
		return nil, err
	}
	c := &Cluster{env: env, timeout: opts.Timeout, done: make(chan error, 2)}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.cfg, err = env.Start(); err != nil {
		return nil, fmt.Errorf("starting the control plane (kube-apiserver and etcd from Options.ControlPlane or KUBEBUILDER_ASSETS): %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	scheme, err := controllers.NewScheme()
	if err != nil {
		return nil, err
	}
	if c.client, err = client.New(c.cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if err := c.seed(ctx, seed, opts.Nodes); err != nil {
		return nil, err
	}
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Environment is the control plane with winready's CRD and Calico's, not yet
// started: the one envtest environment of winready's suites. Of opts it reads
// CalicoCRDs, ControlPlane, CalicoCRDSet, NoWinreadyCRD, CRDDirectories and
// Snapshots.
// The CRDs are given CRDInstallWait to be served and the control plane two
// minutes to start unless KUBEBUILDER_CONTROLPLANE_START_TIMEOUT says
// otherwise. A suite sets what else it needs on the environment before
// starting it, kube-apiserver's flags for one
// (env.ControlPlane.GetAPIServer().Configure()).
func Environment(opts Options) (*Env, error) { return environment(opts) }

// environment is the control plane with the CRDs opts asks for.
func environment(opts Options) (*Env, error) {
	var dirs []string
	if opts.CalicoCRDSet != NoCalicoCRDs {
		dir := opts.CalicoCRDs
		if dir == "" {
			dir = os.Getenv(CalicoCRDsEnv)
		}
		if dir == "" {
			return nil, fmt.Errorf("no Calico CRDs: set Options.CalicoCRDs or %s to a directory with operator/ and calico/ "+
				"(bin/crds after hack/calico-crds.sh in a winready checkout)", CalicoCRDsEnv)
		}
		switch opts.CalicoCRDSet {
		case AllCalicoCRDs:
			dirs = append(dirs, filepath.Join(dir, "operator"), filepath.Join(dir, "calico"))
		case OperatorCRDsOnly:
			dirs = append(dirs, filepath.Join(dir, "operator"))
		default:
			return nil, fmt.Errorf("unknown Options.CalicoCRDSet %d: want AllCalicoCRDs, OperatorCRDsOnly or NoCalicoCRDs",
				opts.CalicoCRDSet)
		}
	}
	dirs = append(dirs, opts.CRDDirectories...)
	var own []*apiextensionsv1.CustomResourceDefinition
	if !opts.NoWinreadyCRD {
		var err error
		if own, err = crd.CRDs(); err != nil {
			return nil, err
		}
	}
	env := &envtest.Environment{
		CRDs:                  own,
		CRDDirectoryPaths:     dirs,
		ErrorIfCRDPathMissing: true,
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: CRDInstallWait},
		BinaryAssetsDirectory: opts.ControlPlane,
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		// envtest's 20 seconds are short on a busy CI runner.
		env.ControlPlaneStartTimeout = controlPlaneStartTimeout
	}
	if err := setAPIServerFlags(env, os.Getenv(APIServerFlagsEnv)); err != nil {
		return nil, err
	}
	snapshots := opts.Snapshots
	if snapshots == "" {
		snapshots = os.Getenv(SnapshotsEnv)
	}
	return &Env{Environment: env, snapshots: snapshots}, nil
}

// setAPIServerFlags gives env's kube-apiserver the flags of APIServerFlagsEnv.
func setAPIServerFlags(env *envtest.Environment, flags string) error {
	args := env.ControlPlane.GetAPIServer().Configure()
	for _, flag := range strings.Fields(flags) {
		name, value, ok := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
		if !strings.HasPrefix(flag, "--") || !ok || name == "" {
			return fmt.Errorf("%s: %q is not a kube-apiserver flag of the form --name=value", APIServerFlagsEnv, flag)
		}
		args.Set(name, value)
	}
	return nil
}

// run starts the simulated Tigera operator, waits for the seeded cluster to
// be at rest, then starts winready's manager as internal/cli wires it.
func (c *Cluster) run(ctx context.Context) error {
	for _, ns := range []string{Namespace, round.DefaultNamespace} {
		err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	scheme := c.client.Scheme()
	sim, _, _, err := calicosim.NewManager(c.cfg, scheme, calicosim.Options{}, round.DefaultNamespace)
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.start(mctx, sim)
	if err := calicosim.WaitSettled(ctx, c.client, c.timeout); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(c.cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   controllers.CacheOptions(round.DefaultNamespace),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Several clusters may run, one after another, in one test binary.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if _, err := controllers.Setup(mgr, controllers.Options{Namespace: Namespace, ProbeNamespace: round.DefaultNamespace,
		ProbeImage: "winready:kit"}); err != nil {
		return err
	}
	c.start(mctx, mgr)
	return nil
}

func (c *Cluster) start(ctx context.Context, mgr ctrl.Manager) {
	c.running++
	go func() { c.done <- mgr.Start(ctx) }()
}

// Stop stops winready, the simulator and the control plane.
func (c *Cluster) Stop() error {
	var err error
	if c.cancel != nil {
		c.cancel()
	}
	for ; c.running > 0; c.running-- {
		err = errors.Join(err, <-c.done)
	}
	if c.env != nil {
		err = errors.Join(err, c.env.Stop())
		c.env = nil
	}
	return err
}

// CRDInstallWait bounds the wait for the CRDs to be served: envtest's 10
// seconds are short on two cores where make test starts several control
// planes at once (the CRD install, not the start, timed out there).
const CRDInstallWait = 2 * time.Minute
