// Package plugin is kubectl winready, the kubectl plugin for people who run
// a migration: it shows where the migration stands and makes the few spec
// changes a migration needs (approve a step, pause, resume, roll back), each
// as one merge patch. It is the winready binary under the name
// kubectl-winready, so it reads the same types the operator writes.
package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/version"
)

// options are what every command shares: the kubectl flags, the streams,
// the clock and the client they make.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	now     func() time.Time
	// restConfig is set by tests; nil reads the kubectl flags.
	restConfig func() (*rest.Config, error)
}

func (o *options) config() (*rest.Config, error) {
	if o.restConfig != nil {
		return o.restConfig()
	}
	return o.flags.ToRESTConfig()
}

func (o *options) client() (client.Client, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	scheme, err := schemeOf()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

func newOptions(streams genericiooptions.IOStreams) *options {
	return &options{flags: genericclioptions.NewConfigFlags(true), streams: streams, now: time.Now}
}

func newCommand(o *options) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-winready",
		Short:         "Watch and steer the migration of this cluster's Calico to the mode Windows nodes need",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.flags.AddFlags(root.PersistentFlags())
	root.SetOut(o.streams.Out)
	root.SetErr(o.streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(ExitError, err) })
	root.AddCommand(statusCommand(o), approveCommand(o), pauseCommand(o, true), pauseCommand(o, false),
		rollbackCommand(o), planCommand(o), versionCommand(o))
	return root
}

func versionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(o.streams.Out, version.Get())
			return err
		},
	}
}

// get reads the one WindowsReadiness.
func (o *options) get(ctx context.Context, c client.Client) (*v1alpha1.WindowsReadiness, error) {
	wr := &v1alpha1.WindowsReadiness{}
	if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errNoWindowsReadiness
		}
		return nil, fmt.Errorf("reading WindowsReadiness %s: %w", v1alpha1.Name, err)
	}
	return wr, nil
}

// printAs writes obj as JSON or YAML; "" is the caller's own format.
func printAs(w io.Writer, format string, obj any) (bool, error) {
	switch format {
	case "":
		return false, nil
	case "json":
		data, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintln(w, string(data))
		return true, err
	case "yaml":
		data, err := yaml.Marshal(obj)
		if err != nil {
			return true, err
		}
		_, err = w.Write(data)
		return true, err
	}
	return true, errUnknownOutput(format)
}

func errUnknownOutput(format string) error {
	return withCode(ExitError, fmt.Errorf("unknown output format %q: use table, json or yaml", format))
}

// patchSpec merges spec into the WindowsReadiness's spec and prints what
// changed and what to watch next.
func (o *options) patchSpec(ctx context.Context, spec map[string]any, what, next string) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	wr, err := o.get(ctx, c)
	if err != nil {
		return err
	}
	data, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, wr, client.RawPatch("application/merge-patch+json", data)); err != nil {
		return fmt.Errorf("patching WindowsReadiness %s: %w", v1alpha1.Name, err)
	}
	_, err = fmt.Fprintf(o.streams.Out, "windowsreadiness/%s patched: %s\nnext: %s\n", v1alpha1.Name, what, next)
	return err
}

func approveCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "approve STEP",
		Short: "Approve a disruptive step that waits for approval (adds it to spec.approvedSteps)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			step := v1alpha1.StepName(args[0])
			if !slices.Contains(v1alpha1.StepNames, step) {
				return fmt.Errorf("unknown step %q: one of %v", step, v1alpha1.StepNames)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			wr, err := o.get(cmd.Context(), c)
			if err != nil {
				return err
			}
			if slices.Contains(wr.Spec.ApprovedSteps, step) {
				_, err := fmt.Fprintf(o.streams.Out, "windowsreadiness/%s unchanged: %s is approved already\n", v1alpha1.Name, step)
				return err
			}
			// The whole list, with the resourceVersion as a guard: a merge
			// patch replaces lists, so an approval made meanwhile must not be lost.
			approved := append(slices.Clone(wr.Spec.ApprovedSteps), step)
			data, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": wr.ResourceVersion},
				"spec": map[string]any{"approvedSteps": approved}})
			if err != nil {
				return err
			}
			if err := c.Patch(cmd.Context(), wr, client.RawPatch("application/merge-patch+json", data)); err != nil {
				return fmt.Errorf("patching WindowsReadiness %s (run it again if someone else changed it meanwhile): %w", v1alpha1.Name, err)
			}
			_, err = fmt.Fprintf(o.streams.Out, "windowsreadiness/%s patched: spec.approvedSteps %v\nnext: kubectl winready status --watch (step %s starts)\n",
				v1alpha1.Name, approved, step)
			return err
		},
	}
}

func pauseCommand(o *options, pause bool) *cobra.Command {
	use, short, what, next := "pause", "Pause before the next change (spec.paused: true)", "spec.paused true",
		"kubectl winready status (the step under way finishes its wait; no new change starts)"
	if !pause {
		use, short, what, next = "resume", "Resume a paused migration or rollback (spec.paused: false)", "spec.paused false",
			"kubectl winready status --watch"
	}
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.patchSpec(cmd.Context(), map[string]any{"paused": pause}, what, next)
		},
	}
}

func rollbackCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback",
		Short: "Roll the migration back to the recorded originals (spec.direction: Rollback); refused while Windows nodes exist",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.patchSpec(cmd.Context(), map[string]any{"direction": v1alpha1.DirectionRollback}, "spec.direction Rollback",
				"kubectl winready status --watch (phase RollingBack, then RolledBack)")
		},
	}
}
