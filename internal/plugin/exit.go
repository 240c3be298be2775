package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/version"
)

// Exit statuses, the same under both names (winready plan and kubectl
// winready), so that a script can tell what went wrong without parsing text.
const (
	// ExitFailed: a preflight check fails (plan), or a request failed for a
	// reason none of the statuses below names.
	ExitFailed = 1
	// ExitError: plan's error (anything but a failed check); for the other
	// commands a wrong flag or argument.
	ExitError = 2
	// ExitUnreachable: no cluster configured, or it does not answer.
	ExitUnreachable = 3
	// ExitNotInstalled: the API server does not serve the WindowsReadiness CRD.
	ExitNotInstalled = 4
	// ExitNoWindowsReadiness: winready is installed, WindowsReadiness default is not.
	ExitNoWindowsReadiness = 5
	// ExitManagedByGitOps: nothing changed because a GitOps tool owns the
	// object; the spec to commit was printed.
	ExitManagedByGitOps = 6
	// ExitRefused: the change was refused (rollback not allowed, or not
	// confirmed).
	ExitRefused = 7
)

// exitError ends the command with a given status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// Run runs args under name ("winready" or "kubectl winready"), prints an
// error to streams.ErrOut and returns the exit status.
func Run(ctx context.Context, name string, args []string, streams genericiooptions.IOStreams) int {
	return execute(ctx, newOptions(streams), name, args)
}

func execute(ctx context.Context, o *options, name string, args []string) int {
	cmd := newCommand(o)
	cmd.Use = strings.ReplaceAll(name, " ", "-")
	cmd.Annotations = map[string]string{"cobra.io/display-name": name}
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	e := explain(err)
	fmt.Fprintf(o.streams.ErrOut, "%s: %v\n", name, e.err)
	return e.code
}

// explain gives err the exit status and the message that say what to do.
func explain(err error) *exitError {
	var e *exitError
	if errors.As(err, &e) {
		return e
	}
	switch {
	case meta.IsNoMatchError(err):
		return &exitError{code: ExitNotInstalled, err: fmt.Errorf(
			"winready is not installed in this cluster: the API server does not serve %s windowsreadinesses (%w).\nInstall it:\n  kubectl apply -f %s",
			v1alpha1.GroupVersion, err, installURL())}
	case unreachable(err):
		return &exitError{code: ExitUnreachable, err: fmt.Errorf(
			"cannot reach the cluster (%w).\nCheck the cluster kubectl uses: kubectl cluster-info, or pass --context or --kubeconfig", err)}
	case strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "accepts "):
		return &exitError{code: ExitError, err: err}
	}
	return &exitError{code: ExitFailed, err: err}
}

// unreachable is whether err says no request reached an API server.
func unreachable(err error) bool {
	if clientcmd.IsEmptyConfig(err) || clientcmd.IsConfigurationInvalid(err) {
		return true
	}
	var ue *url.Error
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.As(err, &oe)
}

// installURL is the install.yaml of this build's release.
func installURL() string {
	if strings.HasPrefix(version.Version, "v") {
		return "https://github.com/winready/winready/releases/download/" + version.Version + "/install.yaml"
	}
	return "https://github.com/winready/winready/releases/latest/download/install.yaml"
}

// errNoWindowsReadiness is the message of a missing WindowsReadiness: the
// lines that create one.
var errNoWindowsReadiness = withCode(ExitNoWindowsReadiness, fmt.Errorf(
	`winready is installed, but there is no WindowsReadiness %s yet. Create it (in Git, if you keep the cluster there):
  kubectl apply -f - <<EOF
  apiVersion: %s
  kind: WindowsReadiness
  metadata:
    name: %s
  spec: {direction: Migrate}
  EOF`, v1alpha1.Name, v1alpha1.GroupVersion, v1alpha1.Name))
