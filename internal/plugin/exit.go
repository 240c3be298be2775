package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	// ExitForbidden: the API server refused a request (403); the message
	// names the verb, the resource and the ClusterRole that grants it.
	ExitForbidden = 8
	// ExitCheckFailed: check found something to fix; each failing line
	// names the fix. A request that failed exits with its own status.
	ExitCheckFailed = 9
	// ExitTimeout: --timeout passed before the watch got where it was
	// asked to, as timeout(1) exits.
	ExitTimeout = 124
	// ExitInterrupted is 128 plus the signal's number, as a shell reports a
	// process the signal ended: 130 for SIGINT (Ctrl-C), 143 for SIGTERM. A
	// pipeline must not read an interrupted watch as one that got there.
	ExitInterrupted = 128
)

// interrupted is the cause of a context ended by a signal.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// SignalContext is parent, cancelled at the first SIGINT or SIGTERM with
// the signal as its cause, so that the exit status can tell which one came
// (signal.NotifyContext does not say). stop releases the signals.
func SignalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			if s, ok := sig.(syscall.Signal); ok {
				cancel(interrupted{sig: s})
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// exitError ends the command with a given status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// explain gives err the exit status and the message that say what to do.
func explain(err error) *exitError {
	var e *exitError
	if errors.As(err, &e) {
		return e
	}
	switch {
	case apierrors.IsForbidden(err):
		return &exitError{code: ExitForbidden, err: forbidden(err)}
	case meta.IsNoMatchError(err):
		return notInstalledExit(err)
	case unreachable(err):
		return &exitError{code: ExitUnreachable, err: fmt.Errorf(
			"cannot reach the cluster (%w).\nCheck the cluster kubectl uses: kubectl cluster-info, or pass --context or --kubeconfig", err)}
	case strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "accepts "):
		return &exitError{code: ExitError, err: err}
	}
	return &exitError{code: ExitFailed, err: err}
}

// notInstalled is the error of an API server that does not serve the CRD.
func notInstalled(err error) error { return notInstalledExit(err) }

// notInstalledExit is notInstalled as the exit status it is.
func notInstalledExit(err error) *exitError {
	return &exitError{code: ExitNotInstalled, err: fmt.Errorf(
		"winready is not installed in this cluster: the API server does not serve %s windowsreadinesses (%w).\nInstall it:\n  kubectl apply -f %s",
		v1alpha1.GroupVersion, err, installURL())}
}

// apiCall is a request the plugin made, for the message of a 403: the API
// server's Status names the resource but not the verb.
type apiCall struct {
	verb, resource string
	err            error
}

func (a *apiCall) Error() string { return a.err.Error() }
func (a *apiCall) Unwrap() error { return a.err }

// request wraps err from verb on resource (as RBAC spells them), nil when
// err is.
func request(verb, resource string, err error) error {
	if err == nil {
		return nil
	}
	return &apiCall{verb: verb, resource: resource, err: err}
}

// forbidden says who may not do what, and which of winready's ClusterRoles
// grants it (config/rbac/user_roles.yaml, plan_role.yaml).
func forbidden(err error) error {
	verb, resource := "", ""
	var call *apiCall
	if errors.As(err, &call) {
		verb, resource = call.verb, call.resource
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil && resource == "" && d.Kind != "" {
			resource = d.Kind
			if d.Group != "" {
				resource += "." + d.Group
			}
		}
	}
	role := "winready-plan"
	switch {
	case resource == windowsReadinesses && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+adminPolicy+"'"):
		// A rollback or an acknowledgement: RBAC let the patch through,
		// the policy asks for winready-admin's verbs.
		role = "winready-admin"
	case resource == windowsReadinesses && (verb == "patch" || verb == "update"):
		role = "winready-editor"
	case resource == windowsReadinesses || resource == "events" || resource == "events.events.k8s.io":
		role = "winready-viewer"
	}
	what := "make this request"
	if verb != "" {
		what = verb + " " + resource
	}
	if slices.Contains(unroled, resource) {
		return fmt.Errorf("forbidden: you may not %s (%w).\n"+
			"None of winready's ClusterRoles grants it: check reads what install.yaml installed, as a cluster admin does; "+
			"ask one to run it, or for that right", what, err)
	}
	return fmt.Errorf("forbidden: you may not %s (%w).\n"+
		"The ClusterRole %s grants it (config/rbac); ask for a ClusterRoleBinding to it, e.g.\n"+
		"  kubectl create clusterrolebinding <you>-%s --clusterrole=%s --user=<you>", what, err, role, role, role)
}

// adminPolicy is the admission policy that keeps a rollback and an
// acknowledgement for ClusterRole winready-admin (config/admission/people.yaml).
const adminPolicy = "winready-admin-changes"

// unroled are what check reads that none of winready's roles for people
// grants: naming one of them would send the person to the wrong binding.
var unroled = []string{"deployments.apps", "validatingadmissionpolicies.admissionregistration.k8s.io",
	"validatingadmissionpolicybindings.admissionregistration.k8s.io", "selfsubjectaccessreviews.authorization.k8s.io"}

// windowsReadinesses is the WindowsReadiness resource as RBAC names it.
var windowsReadinesses = "windowsreadinesses." + v1alpha1.GroupVersion.Group

// unreachable is whether err says no request reached an API server.
func unreachable(err error) bool {
	if clientcmd.IsEmptyConfig(err) {
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

// orCause is ctx's cause when ctx has ended (a timeout, a signal), which
// says more than the request it cut short; err otherwise.
func orCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
