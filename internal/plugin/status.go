package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"slices"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

func statusCommand(o *options) *cobra.Command {
	var until string
	var watch bool
	printFlags := genericclioptions.NewPrintFlags("")
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show where the migration stands: conditions, steps, the rollout, the preflight, Windows node joins",
		Long: "Shows the WindowsReadiness as a tree, each condition and step with how long ago it got where it is (SINCE). " +
			"Two or more preflight checks that pass, and two or more completed steps, are one line each; what fails, " +
			"warns or is under way is shown in full, and --show-all shows every check and step. --watch watches it and prints it again each time its spec or status " +
			"changes, riding out API errors with a backoff. --until Ready|Stalled|RolledBack watches until the object " +
			"gets there, then exits 0; it exits 1 when the migration stalls on the way to Ready or RolledBack.",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if until != "" && !slices.Contains(untilStates, until) {
				return withCode(ExitError, fmt.Errorf("--until %q: one of %s", until, strings.Join(untilStates, ", ")))
			}
			var printer printers.ResourcePrinter
			if *printFlags.OutputFormat != "" {
				scheme, err := schemeOf()
				if err != nil {
					return err
				}
				if printer, err = printFlags.WithTypeSetter(scheme).ToPrinter(); err != nil {
					return withCode(ExitError, err)
				}
			}
			// A watch prints a stream: JSON one object a line, YAML documents
			// separated by --- (the YAML printer does that itself).
			oneLine := *printFlags.OutputFormat == "json"
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, timeout, withCode(ExitTimeout,
					fmt.Errorf("timed out: --timeout %s passed%s", duration.HumanDuration(timeout), untilSuffix(until))))
				defer cancel()
			}
			if watch || until != "" {
				return o.watchStatus(ctx, printer, oneLine, until)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			wr, err := o.get(ctx, c)
			if err != nil {
				return orCause(ctx, err)
			}
			return o.print(ctx, c, wr, printer)
		},
	}
	// -o json|yaml|name|jsonpath=...|go-template=...: the object instead
	// of the tree.
	printFlags.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.showAll, "show-all", false, "show every preflight check and every step, those that passed or completed too")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "watch, and print again each time the spec or the status changes")
	cmd.Flags().StringVar(&until, "until", "", "watch until the WindowsReadiness is Ready, Stalled or RolledBack (implies --watch)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (e.g. 15h) and exit 124; 0 waits for ever")
	return cmd
}

func untilSuffix(until string) string {
	if until == "" {
		return ""
	}
	return " before the WindowsReadiness was " + until
}

var untilStates = []string{"Ready", "Stalled", "RolledBack"}
