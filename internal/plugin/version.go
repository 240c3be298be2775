package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"

	"github.com/winready/winready/internal/version"
)

// versionLabel is the label that says which release a workload runs
// (Kubernetes' recommended labels); a Deployment without it is read from its
// image's tag.
const versionLabel = "app.kubernetes.io/version"

// versions is what version -o json|yaml prints, named as kubectl version
// names its own.
type versions struct {
	Client     version.Info              `json:"clientVersion"`
	Kubernetes *apimachineryversion.Info `json:"kubernetesVersion,omitempty"`
	// Manager is nil with --client, and when winready is not installed.
	Manager *managerVersion `json:"managerVersion,omitempty"`
}

// managerVersion is the release the manager's Deployment runs.
type managerVersion struct {
	// Version is the Deployment's app.kubernetes.io/version, else its
	// image's tag; "" when neither says (an image pinned by digest alone).
	Version string `json:"version,omitempty"`
	Image   string `json:"image"`
}

func versionCommand(o *options) *cobra.Command {
	var clientOnly bool
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, the Kubernetes server's and the winready manager's",
		Long: "Prints this plugin's release and commit, then the Kubernetes server's version and the release the " +
			"manager's Deployment (" + managerNamespace + "/" + managerDeployment + ") runs. --client prints the " +
			"plugin's alone and contacts no cluster. When the cluster cannot be reached, the plugin's version is " +
			"printed and the command exits 3.",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return errUnknownOutput(output)
			}
			v := versions{Client: version.Get()}
			if clientOnly {
				return printVersions(o.streams.Out, output, v)
			}
			// The client's version first, whatever the cluster answers:
			// that is what a bug report needs most.
			if output == "" {
				if err := printVersions(o.streams.Out, output, v); err != nil {
					return err
				}
			}
			err := o.serverVersions(cmd.Context(), &v)
			if output != "" {
				if perr := printVersions(o.streams.Out, output, v); perr != nil && err == nil {
					err = perr
				}
			} else if err == nil {
				printServerVersions(o.streams.Out, v)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the plugin's version only, without contacting the cluster")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}

// serverVersions reads the Kubernetes server's version and the manager's
// into v.
func (o *options) serverVersions(ctx context.Context, v *versions) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(boundedRequests(cfg))
	if err != nil {
		return err
	}
	if v.Kubernetes, err = cs.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("reading the server's version: %w", err)
	}
	dep, err := cs.AppsV1().Deployments(managerNamespace).Get(ctx, managerDeployment, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Deployment %s/%s: %w", managerNamespace, managerDeployment,
			request("get", "deployments.apps", err))
	}
	m := &managerVersion{Version: dep.Labels[versionLabel]}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			m.Image = c.Image
		}
	}
	if m.Version == "" {
		m.Version = imageTag(m.Image)
	}
	v.Manager = m
	return nil
}

// imageTag is the tag of an image reference, "" when it has none:
// registry:5000/winready:v0.1.0@sha256:... is v0.1.0, registry:5000/winready
// and winready@sha256:... have none.
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return ""
	}
	return image[i+1:]
}

func printVersions(w io.Writer, output string, v versions) error {
	if output != "" {
		_, err := printAs(w, output, v)
		return err
	}
	_, err := fmt.Fprintf(w, "Client Version: %s\n", v.Client)
	return err
}

func printServerVersions(w io.Writer, v versions) {
	fmt.Fprintf(w, "Kubernetes Version: %s\n", v.Kubernetes.GitVersion)
	switch m := v.Manager; {
	case m == nil:
		fmt.Fprintf(w, "Manager Version: not installed (no Deployment %s/%s)\n", managerNamespace, managerDeployment)
	case m.Version == "":
		fmt.Fprintf(w, "Manager Version: unknown (image %s)\n", m.Image)
	default:
		fmt.Fprintf(w, "Manager Version: %s (image %s)\n", m.Version, m.Image)
	}
}
