package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/winready/winready/internal/plugin"
)

// runPlan is winready plan, the operator's dry run for CI: the same command
// as kubectl winready plan, with kubectl's flags, the same output and exit
// statuses (0 passes, 1 a check fails, 2 any other error).
func runPlan(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return plan(ctx, args, stdout, stderr)
}

func plan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return plugin.Run(ctx, "winready", append([]string{"plan"}, args...),
		genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr})
}
