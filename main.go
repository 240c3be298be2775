// Command winready runs the WindowsReadiness operator.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/winready/winready/controllers"
)

// The image has three roles: the operator, the probe agent it runs on every
// Linux node during preflight, and the responder an admin runs on a future
// Windows node.
func main() {
	run := runOperator
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "probe":
			run, args = runProbe, args[1:]
		case "respond":
			run, args = runRespond, args[1:]
		}
	}
	if err := run(args); err != nil {
		fmt.Fprintln(os.Stderr, "winready:", err)
		os.Exit(1)
	}
}

func runOperator(args []string) error {
	fs := flag.NewFlagSet("winready", flag.ContinueOnError)
	var (
		kubeconfig  = fs.String("kubeconfig", "", "path to a kubeconfig; in a pod the service account is used")
		namespace   = fs.String("namespace", "winready-system", "the operator's namespace: leader election lease and probe rounds")
		leaderElect = fs.Bool("leader-elect", true, "elect a leader so that only one replica changes the cluster")
		metricsAddr = fs.String("metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
		probeAddr   = fs.String("health-probe-bind-address", ":8081", "address of the health and readiness probes")
		probeImage  = fs.String("probe-image", os.Getenv("WINREADY_IMAGE"), "image of the UDP 4789 probe agents: this operator's own (env WINREADY_IMAGE)")
	)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	scheme, err := controllers.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controllers.CacheOptions(*namespace),
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "winready.winready.io",
		LeaderElectionNamespace: *namespace,
		// Hand over quickly on a clean shutdown: the migration resumes from
		// what the cluster shows, so nothing is lost.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	r, err := controllers.NewReconciler(mgr, *namespace, *probeImage)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the reconciler: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting winready")
	return mgr.Start(ctrl.SetupSignalHandler())
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
