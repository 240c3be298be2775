// Package cli is the winready command: the operator, the probe agent and the
// pod network check it runs on the nodes, the responder, winready plan and
// winready version, and, installed as kubectl-winready, the kubectl plugin.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/winready/winready/internal/plugin"
	"github.com/winready/winready/internal/version"
)

// Main runs winready with argv (os.Args: the program's name first) and
// returns its exit status. The image has three roles: the operator, the probe
// agent it runs on every Linux node during preflight, and the responder an
// admin runs on a future Windows node.
func Main(argv []string, stdout, stderr io.Writer) int {
	// Installed as kubectl-winready (krew, or a link), the binary is the
	// kubectl plugin.
	if strings.TrimSuffix(filepath.Base(argv[0]), ".exe") == "kubectl-winready" {
		return runPlugin(argv[1:], stdout, stderr)
	}
	return dispatch(argv[1:], stdout, stderr, commands{
		operator: runManager,
		probe:    runProbe,
		respond:  runRespond,
		plan:     func(args []string) int { return runPlan(args, stdout, stderr) },
	})
}

// commands are what dispatch may run; tests replace them.
type commands struct {
	operator func(operatorOptions) error
	probe    func(args []string) error
	respond  func(args []string) error
	plan     func(args []string) int
}

// exitError ends winready with a given status; err, when set, is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

const usageText = `Usage:
  winready [flags]           run the operator (in a pod, or against --kubeconfig)
  winready probe [flags]     the UDP 4789 probe agent the operator runs on every Linux node during preflight
  winready respond [flags]   answer the probes on a future Windows node
  winready podcheck [flags] the pod network check the operator runs in a pod on every Linux node after each disruptive step
  winready plan [flags]      run the preflight checks and print the migration plan, read-only (for CI); the same as kubectl winready plan
  winready version           print the version, the commit it was built from and the Go version

"winready probe -h", "winready respond -h" and "winready plan -h" list their flags.

Operator flags:
`

// dispatch runs the command args name and returns the exit status: 0 on
// success or help, 1 when the command fails, 2 on a usage error, or the
// status a command's exitError carries. An unknown command or a stray
// argument runs nothing.
func dispatch(args []string, stdout, stderr io.Writer, cmds commands) int {
	fs, opts := operatorFlags()
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "winready: "+format+"\n", a...)
		fs.Usage()
		return 2
	}

	var err error
	switch {
	case len(args) > 0 && args[0] == "probe":
		err = cmds.probe(args[1:])
	case len(args) > 0 && args[0] == "respond":
		err = cmds.respond(args[1:])
	case len(args) > 0 && args[0] == "podcheck":
		err = runPodCheck(args[1:])
	case len(args) > 0 && args[0] == "plan":
		return cmds.plan(args[1:])
	case len(args) > 0 && args[0] == "version":
		if len(args) > 1 {
			return usageError("unexpected argument %q", args[1])
		}
		fmt.Fprintln(stdout, version.Get())
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		return usageError("unknown command %q", args[0])
	default:
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2 // the flag package has printed the error and the usage
		}
		if fs.NArg() > 0 {
			return usageError("unexpected argument %q", fs.Arg(0))
		}
		err = cmds.operator(*opts)
	}
	return exitStatus(err, stderr)
}

// exitStatus is the status a command's error ends winready with, printed to
// stderr unless it is help.
func exitStatus(err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var exit *exitError
	if errors.As(err, &exit) {
		if exit.err != nil {
			fmt.Fprintln(stderr, "winready:", exit.err)
		}
		return exit.code
	}
	if err != nil {
		fmt.Fprintln(stderr, "winready:", err)
		return 1
	}
	return 0
}

// runPlugin runs kubectl winready and returns its exit status.
func runPlugin(args []string, stdout, stderr io.Writer) int {
	// The signal is the context's cause: an interrupted command exits 130
	// or 143, never 0.
	ctx, stop := plugin.SignalContext(context.Background())
	defer stop()
	return plugin.Run(ctx, "kubectl winready", args, genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr})
}
