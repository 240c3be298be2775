package cli

import (
	"context"
	"io"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/winready/winready/internal/plugin"
)

// runPlan is winready plan, the operator's dry run for CI: the same command
// as kubectl winready plan, with kubectl's flags, the same output and exit
// statuses (0 passes, 1 a check fails, 2 any other error).
func runPlan(args []string, stdout, stderr io.Writer) int {
	// The signal is the context's cause: an interrupted command exits 130
	// or 143, never 0.
	ctx, stop := plugin.SignalContext(context.Background())
	defer stop()
	return plan(ctx, args, stdout, stderr)
}

func plan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return plugin.Run(ctx, "winready", append([]string{"plan"}, args...),
		genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr})
}
