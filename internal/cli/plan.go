package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/plugin"
)

// Exit statuses of winready plan besides 0: the preflight passed, warnings
// allowed, and the plan is printed.
const (
	planFailed = 1 // a preflight check failed
	planError  = 2 // anything else: flags, --spec, the cluster
)

const planUsage = `Usage: winready plan [--kubeconfig PATH] [--spec FILE]

Runs winready's preflight compatibility checks (not the UDP 4789 probe)
against the cluster and prints every change the migration would make, with
the values before and after. It changes nothing and needs only get and list.

Exit status: 0 the preflight passes (warnings allowed) and the plan is
printed; 1 a preflight check fails; 2 any other error.

Flags:
`

// runPlan is winready plan: the operator's dry run, read-only, for CI.
func runPlan(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return plan(ctx, args, os.Stdout, os.Stderr)
}

func plan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, planUsage)
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig that may get and list; without it, $KUBECONFIG, ~/.kube/config or the pod's service account")
	specFile := fs.String("spec", "", "a WindowsReadiness YAML whose spec (serviceCIDRs, apiServer, preflight.acknowledge) shapes the checks and the targets; without it, an empty spec")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: planError} // the flag package has printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "winready plan: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return &exitError{code: planError}
	}
	fail := func(err error) error { return &exitError{code: planError, err: err} }

	wr, err := plugin.ReadSpec(*specFile)
	if err != nil {
		return fail(err)
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return fail(err)
	}
	cfg = plugin.ReadOnly(cfg)
	scheme, err := controllers.NewScheme()
	if err != nil {
		return fail(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fail(fmt.Errorf("creating the client: %w", err))
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fail(fmt.Errorf("creating the discovery client: %w", err))
	}

	res, err := controllers.PlanCluster(ctx, c, disco, wr)
	plugin.PrintPlan(stdout, res)
	if err != nil {
		return fail(err)
	}
	if err := plugin.PreflightFailure(res); err != nil {
		return &exitError{code: planFailed, err: err}
	}
	return nil
}
