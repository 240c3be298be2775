package cli

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/internal/securemetrics"
	"github.com/winready/winready/internal/version"
)

// operatorOptions are the operator's flags, operatorFlags binds them.
type operatorOptions struct {
	kubeconfig     string
	namespace      string
	probeNamespace string
	leaderElect    bool
	metricsAddr    string
	metricsSecure  bool
	metricsCertDir string
	probeAddr      string
	probeImage     string
	// requireBounds holds the manager until its admission policies exist.
	requireBounds bool
	zap           zap.Options
}

func operatorFlags() (*flag.FlagSet, *operatorOptions) {
	o := &operatorOptions{}
	fs := flag.NewFlagSet("winready", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; in a pod the service account is used")
	fs.StringVar(&o.namespace, "namespace", "winready-system", "the operator's namespace: leader election lease and the record of the originals")
	fs.StringVar(&o.probeNamespace, "probe-namespace", round.DefaultNamespace, "namespace of the probe rounds (privileged Pod Security level, guarded by an admission policy)")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so that only one replica changes the cluster")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to scrapers the API server authenticates and allows get on /metrics; false serves plain HTTP to anyone (a local demo)")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory of the metrics endpoint's tls.crt and tls.key; without them a self-signed certificate")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	fs.StringVar(&o.probeImage, "probe-image", os.Getenv("WINREADY_IMAGE"), "image of the UDP 4789 probe agents: this operator's own (env WINREADY_IMAGE)")
	fs.BoolVar(&o.requireBounds, "require-admission-policies", true, "make no write until every admission policy and binding of this build exists (config/admission); false runs without them, on a development cluster only")
	// Kept so that existing command lines still start: a write spanning the
	// Installation and the services endpoint holds calico-node instead of
	// waiting for the Tigera operator to rest (controllers/hold.go).
	fs.Duration("operator-quiet", 0, "deprecated, no effect")
	o.zap.BindFlags(fs)
	return fs, o
}

// runManager starts the operator's manager and runs it until a signal stops
// it: the one place where the manager is wired for production.
func runManager(o operatorOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if o.requireBounds {
		if err := waitForBounds(ctx, cfg, o.probeAddr, ctrl.Log.WithName("bounds")); err != nil {
			return fmt.Errorf("waiting for winready's admission policies: %w", err)
		}
	}
	scheme, err := controllers.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controllers.CacheOptions(o.probeNamespace),
		Metrics:                 securemetrics.Options(o.metricsAddr, o.metricsSecure, o.metricsCertDir),
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "winready.winready.io",
		LeaderElectionNamespace: o.namespace,
		// Hand over quickly on a clean shutdown: the migration resumes from
		// what the cluster shows, so nothing is lost.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if _, err := controllers.Setup(mgr, controllers.Options{Namespace: o.namespace, ProbeNamespace: o.probeNamespace,
		ProbeImage: o.probeImage}); err != nil {
		return fmt.Errorf("setting up the reconciler: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	v := version.Get()
	ctrl.Log.Info("starting winready", "version", v.Version, "revision", v.Revision)
	return mgr.Start(ctx)
}

// restConfig is how the manager reaches the API server: the kubeconfig file
// when one is given, else controller-runtime's (in a pod, its ServiceAccount).
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	// As in a pod (ctrl.GetConfig): no client-side rate limit, the API
	// server's priority and fairness decides; a round writes a plan a node.
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}
