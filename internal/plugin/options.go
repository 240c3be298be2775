package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
)

// What every command shares: the options and the client they make, the
// WindowsReadiness read and printed as -o asks, the scheme, and the rule for
// arguments.

// options are what every command shares: the kubectl flags, the streams,
// the clock and the client they make.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	now     func() time.Time
	// restConfig is set by tests; nil reads the kubectl flags.
	restConfig func() (*rest.Config, error)
	// printed, set by tests, is called after status --watch printed.
	printed func()
	// showAll is status --show-all: the tree without folding what passed.
	showAll bool
}

func (o *options) config() (*rest.Config, error) {
	if o.restConfig != nil {
		return o.restConfig()
	}
	cfg, err := o.flags.ToRESTConfig()
	// A kubeconfig that cannot be read, or a --context it lacks, is the
	// caller's mistake, not the cluster's: no request has been made. No
	// kubeconfig at all stays "cannot reach the cluster".
	if err != nil && !clientcmd.IsEmptyConfig(err) {
		return nil, withCode(ExitError, fmt.Errorf("reading the kubeconfig: %w", err))
	}
	return cfg, err
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

// get reads the one WindowsReadiness.
func (o *options) get(ctx context.Context, c client.Client) (*v1alpha1.WindowsReadiness, error) {
	wr := &v1alpha1.WindowsReadiness{}
	if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errNoWindowsReadiness
		}
		return nil, fmt.Errorf("reading WindowsReadiness %s: %w", v1alpha1.Name, request("get", windowsReadinesses, err))
	}
	return wr, nil
}

// printAs writes plan's result, which is not a Kubernetes object, as JSON or
// YAML; "" is the caller's own format.
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

func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return withCode(ExitError, err)
		}
		return nil
	}
}

// schemeOf is the manager's scheme (controllers.NewScheme) with the Events
// the status tree shows.
func schemeOf() (*runtime.Scheme, error) {
	s, err := controllers.NewScheme()
	if err != nil {
		return nil, err
	}
	return s, eventsv1.AddToScheme(s)
}
