package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/controllers"
)

// planCommand is winready plan as a kubectl plugin: the preflight checks and
// every change the migration would make, read-only, as a table or as JSON or
// YAML for CI.
func planCommand(o *options) *cobra.Command {
	var output, specFile string
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Run the preflight checks and print every change the migration would make, read-only",
		Long: "Runs winready's preflight checks (not the UDP 4789 probe) and prints every change the migration would make, " +
			"with the values before and after. It changes nothing and needs only get and list. A failed check is an error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return errUnknownOutput(output)
			}
			wr, err := ReadSpec(specFile)
			if err != nil {
				return err
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
				PrintPlan(o.streams.Out, res)
				return err
			}
			if done, err := printAs(o.streams.Out, output, res); done {
				if err != nil {
					return err
				}
			} else {
				PrintPlan(o.streams.Out, res)
			}
			return PreflightFailure(res)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml instead of the tables")
	cmd.Flags().StringVar(&specFile, "spec", "", "a WindowsReadiness YAML whose spec (serviceCIDRs, apiServer, preflight.acknowledge) shapes the checks and the targets")
	return cmd
}
