package detect

import (
	"context"
	"slices"
	"strconv"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

// Keys of the services endpoint ConfigMap the Tigera operator reads.
const (
	serviceHostKey = "KUBERNETES_SERVICE_HOST"
	servicePortKey = "KUBERNETES_SERVICE_PORT"
)

// Targets decides the values the migration writes: the spec's overrides,
// else what the cluster already holds (so nothing is changed that was not
// asked for), else what is detected. endpoint is the services endpoint
// ConfigMap, nil when absent. A value no source holds is an error wrapping
// ErrNotFound that says where it was looked for.
func Targets(ctx context.Context, r client.Reader, spec v1alpha1.WindowsReadinessSpec, inst *operatorv1.Installation,
	endpoint *corev1.ConfigMap) (*v1alpha1.Targets, error) {
	t := &v1alpha1.Targets{}
	var sources []string
	switch {
	case len(spec.ServiceCIDRs) > 0:
		for _, c := range spec.ServiceCIDRs {
			t.ServiceCIDRs = append(t.ServiceCIDRs, string(c))
		}
		sources = append(sources, "serviceCIDRs from spec")
	case len(inst.Spec.ServiceCIDRs) > 0:
		t.ServiceCIDRs = slices.Clone(inst.Spec.ServiceCIDRs)
		sources = append(sources, "serviceCIDRs already in the Installation")
	default:
		cidrs, source, err := ServiceCIDRs(ctx, r)
		if err != nil {
			return nil, err
		}
		t.ServiceCIDRs = cidrs
		sources = append(sources, "serviceCIDRs from "+source)
	}
	switch {
	case spec.APIServer != nil:
		t.APIServerHost, t.APIServerPort = spec.APIServer.Host, strconv.Itoa(int(spec.APIServer.Port))
		sources = append(sources, "API server from spec")
	case endpoint != nil && endpoint.Data[serviceHostKey] != "" && endpoint.Data[servicePortKey] != "":
		t.APIServerHost, t.APIServerPort = endpoint.Data[serviceHostKey], endpoint.Data[servicePortKey]
		sources = append(sources, "API server already in kubernetes-services-endpoint")
	default:
		ep, err := APIServer(ctx, r)
		if err != nil {
			return nil, err
		}
		t.APIServerHost, t.APIServerPort = ep.Host, ep.Port
		sources = append(sources, "API server from "+ep.Source)
	}
	t.Source = strings.Join(sources, "; ")
	return t, nil
}
