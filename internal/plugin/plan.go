package plugin

import (
	"errors"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/controllers"
)

// planCommand is winready plan, under both names: the preflight checks and
// every change the migration would make, read-only, as tables or as JSON or
// YAML for CI. Its exit status is the CI contract: 0 the preflight passes,
// 1 a check fails, 2 anything else.
func planCommand(o *options) *cobra.Command {
	var output, specFile string
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Run the preflight checks and print every change the migration would make, read-only",
		Long: "Runs winready's preflight checks (not the UDP 4789 probe) and prints every change the migration would make, " +
			"with the values before and after. It changes nothing and needs only get and list.\n\n" +
			"Exit status: 0 the preflight passes (warnings allowed); 1 a check fails; 2 any other error " +
			"(flags, --spec, the cluster). With -o json or yaml, stdout holds that document and nothing else.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := o.plan(cmd, output, specFile)
			var failed *preflightFailed
			if err == nil || errors.As(err, &failed) {
				return err
			}
			e := explain(err)
			return withCode(ExitError, e.err)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	cmd.Flags().StringVar(&specFile, "spec", "", "a WindowsReadiness YAML whose spec (serviceCIDRs, apiServer, preflight.acknowledge) shapes the checks and the targets")
	return cmd
}

func (o *options) plan(cmd *cobra.Command, output, specFile string) error {
	if output != "table" && output != "json" && output != "yaml" {
		return errUnknownOutput(output)
	}
	wr, err := ReadSpec(specFile)
	if err != nil {
		return withCode(ExitError, err)
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	cfg = ReadOnly(cfg)
	scheme, err := schemeOf()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	res, err := controllers.PlanCluster(cmd.Context(), c, disco, wr)
	if err != nil {
		if output == "table" {
			PrintPlan(o.streams.Out, res)
		}
		return err
	}
	if output == "table" {
		PrintPlan(o.streams.Out, res)
	} else if _, err := printAs(o.streams.Out, output, res); err != nil {
		return err
	}
	return PreflightFailure(res)
}
