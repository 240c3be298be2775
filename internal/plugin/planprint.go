package plugin

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/preflight"
)

// planRequestTimeout bounds each request to the API server, so that CI does
// not hang on an unreachable cluster.
const planRequestTimeout = 30 * time.Second

// PrintPlan writes what winready plan prints: the checks, then, when they
// passed, the targets and the changes.
func PrintPlan(w io.Writer, res controllers.PlanResult) {
	if len(res.Checks) > 0 {
		printChecks(w, res.Checks)
	}
	if res.Passed && res.Targets != nil {
		printTargets(w, res.Targets)
		printChanges(w, res.Plan)
		printCanary(w, res.Canary)
	}
}

// ReadSpec reads the WindowsReadiness in path; "" stands for an empty spec.
func ReadSpec(path string) (*v1alpha1.WindowsReadiness, error) {
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

// ReadOnly makes every request through cfg fail before it leaves, unless it
// only reads.
func ReadOnly(cfg *rest.Config) *rest.Config {
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

// printCanary says how calico-node's rollout would begin.
func printCanary(w io.Writer, c *v1alpha1.CanaryStatus) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nCanary: calico-node's rollout (step %s) begins one node at a time; once %d nodes run the new calico-node, "+
		"the pod network check runs between them and the others, and the rollout goes on at spec.rollout.maxUnavailable "+
		"if it passes, or the step's changes are taken back if it fails (spec.rollout.canary).\n", stepList(c.Steps), c.Size)
}

func stepList(steps []v1alpha1.StepName) string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// oneLine keeps a table row on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// PreflightFailure is the error of a plan whose preflight failed, naming
// each failed check; nil when it passed.
func PreflightFailure(res controllers.PlanResult) error {
	if res.Passed {
		return nil
	}
	var parts []string
	for _, c := range preflight.Failed(res.Checks) {
		parts = append(parts, c.Name+": "+c.Message)
	}
	return &preflightFailed{withCode(ExitFailed,
		fmt.Errorf("preflight failed, the migration would change nothing:\n  %s", strings.Join(parts, "\n  ")))}
}

// preflightFailed is plan's one error that is not exit status 2.
type preflightFailed struct{ error }

func (e *preflightFailed) Unwrap() error { return e.error }
