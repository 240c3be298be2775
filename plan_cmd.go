package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/preflight"
)

// Exit statuses of winready plan besides 0: the preflight passed, warnings
// allowed, and the plan is printed.
const (
	planFailed = 1 // a preflight check failed
	planError  = 2 // anything else: flags, --spec, the cluster
)

// planRequestTimeout bounds each request to the API server, so that CI does
// not hang on an unreachable cluster.
const planRequestTimeout = 30 * time.Second

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

	wr, err := readSpec(*specFile)
	if err != nil {
		return fail(err)
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return fail(err)
	}
	cfg = readOnly(cfg)
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
	if len(res.Checks) > 0 {
		printChecks(stdout, res.Checks)
	}
	if err != nil {
		return fail(err)
	}
	if !res.Passed {
		var parts []string
		for _, c := range preflight.Failed(res.Checks) {
			parts = append(parts, c.Name+": "+c.Message)
		}
		return &exitError{code: planFailed, err: fmt.Errorf("preflight failed, the migration would change nothing:\n  %s",
			strings.Join(parts, "\n  "))}
	}
	printTargets(stdout, res.Targets)
	printChanges(stdout, res.Plan)
	return nil
}

// readSpec reads the WindowsReadiness in path; "" stands for an empty spec.
func readSpec(path string) (*v1alpha1.WindowsReadiness, error) {
	wr := &v1alpha1.WindowsReadiness{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--spec: %w", err)
		}
		if err := yaml.UnmarshalStrict(data, wr); err != nil {
			return nil, fmt.Errorf("--spec %s: %w", path, err)
		}
		if wr.Kind != "WindowsReadiness" || wr.APIVersion != v1alpha1.GroupVersion.String() {
			return nil, fmt.Errorf("--spec %s: not a %s WindowsReadiness (apiVersion %q, kind %q)",
				path, v1alpha1.GroupVersion, wr.APIVersion, wr.Kind)
		}
	}
	switch wr.Spec.Direction {
	case "":
		wr.Spec.Direction = v1alpha1.DirectionMigrate
	case v1alpha1.DirectionRollback:
		return nil, fmt.Errorf("--spec %s: spec.direction is Rollback; winready plan shows the migration only", path)
	}
	return wr, nil
}

// readOnly makes every request through cfg fail before it leaves, unless it
// only reads.
func readOnly(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = planRequestTimeout
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && req.Method != http.MethodHead {
				return nil, fmt.Errorf("winready plan is read-only: refusing %s %s", req.Method, req.URL.Path)
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func printChecks(w io.Writer, checks []v1alpha1.PreflightCheck) {
	fmt.Fprintln(w, "Preflight checks (the UDP 4789 probe runs only in the operator):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRESULT\tMESSAGE")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Result, oneLine(c.Message))
	}
	tw.Flush()
}

func printTargets(w io.Writer, t *v1alpha1.Targets) {
	fmt.Fprintln(w, "\nTargets:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tVALUE")
	fmt.Fprintf(tw, "serviceCIDRs\t%s\n", strings.Join(t.ServiceCIDRs, ","))
	fmt.Fprintf(tw, "API server\t%s:%s\n", t.APIServerHost, t.APIServerPort)
	tw.Flush()
	for _, s := range strings.Split(t.Source, "; ") {
		fmt.Fprintf(w, "  %s\n", s)
	}
}

func printChanges(w io.Writer, plan []v1alpha1.PlannedChange) {
	if len(plan) == 0 {
		fmt.Fprintln(w, "\nNo changes: the cluster already holds every value the migration writes.")
		return
	}
	fmt.Fprintf(w, "\nChanges the migration would make, in order (%d, none made):\n", len(plan))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tOBJECT\tFIELD\tBEFORE\tAFTER")
	for _, c := range plan {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Step, c.Object, c.Field, oneLine(c.Before), oneLine(c.After))
	}
	tw.Flush()
}

// oneLine keeps a table row on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
