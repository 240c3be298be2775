// Package plugin is kubectl winready, the kubectl plugin for people who run
// a migration: it shows where the migration stands and makes the few spec
// changes a migration needs (approve a step, pause, resume, roll back) and
// the requests to its manager (look again, run a check again), each as one
// merge patch. It is the winready binary under the name
// kubectl-winready, so it reads the same types the operator writes.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

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
		rollbackCommand(o), planCommand(o), checkCommand(o), versionCommand(o))
	root.AddCommand(retryCommand(o), rerunCommand(o))
	return root
}

// Run runs args under name ("winready" or "kubectl winready"), prints an
// error to streams.ErrOut and returns the exit status.
func Run(ctx context.Context, name string, args []string, streams genericiooptions.IOStreams) int {
	return execute(ctx, newOptions(streams), name, args)
}

func execute(ctx context.Context, o *options, name string, args []string) int {
	cmd := newCommand(o)
	cmd.Use = strings.ReplaceAll(name, " ", "-")
	cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: name}
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	// A command ended by a signal fails with whatever the cancelled request
	// said; the signal is the news.
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) {
		err = withCode(ExitInterrupted+int(sig.sig), sig)
	}
	e := explain(err)
	fmt.Fprintf(o.streams.ErrOut, "%s: %v\n", name, e.err)
	return e.code
}
