package preflight

import (
	"context"
	"errors"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/detect"
)

// CheckAPIServer names the check of the address calico-node will use.
const CheckAPIServer = "APIServerAddress"

// GatherAPIServer reads what apiServerAddress decides from. existing is the
// services-endpoint ConfigMap, nil when absent.
func GatherAPIServer(ctx context.Context, r client.Reader, spec *v1alpha1.APIServerEndpoint, existing *corev1.ConfigMap) (APIServerInputs, error) {
	var in APIServerInputs
	switch {
	case spec != nil:
		in.Spec = net.JoinHostPort(spec.Host, strconv.Itoa(int(spec.Port)))
	case existing != nil && existing.Data[calico.ServiceHostKey] != "" && existing.Data[calico.ServicePortKey] != "":
		in.Kept = net.JoinHostPort(existing.Data[calico.ServiceHostKey], existing.Data[calico.ServicePortKey])
	default:
		ep, err := detect.APIServer(ctx, r)
		if errors.Is(err, detect.ErrNotFound) {
			return in, nil
		}
		if err != nil {
			return in, err
		}
		in.Detected = &ep
	}
	return in, nil
}

// apiServerAddress refuses to pin calico-node, Typha and calico-node-windows
// to one member of a control plane of several: the address goes into the
// services-endpoint ConfigMap, and when that machine reboots Calico loses its
// API on every node.
func apiServerAddress(in Inputs) v1alpha1.PreflightCheck {
	a := in.APIServer
	switch {
	case a.Spec != "":
		return result(CheckAPIServer, v1alpha1.CheckPass, "calico-node will use spec.apiServer %s", a.Spec)
	case a.Kept != "":
		return result(CheckAPIServer, v1alpha1.CheckPass, "ConfigMap %s/%s already holds %s, which is kept",
			calico.OperatorNamespace, calico.ServicesEndpointConfigMap, a.Kept)
	case a.Detected == nil:
		return result(CheckAPIServer, v1alpha1.CheckInfo,
			"no API server address in kubeadm-config, cluster-info or the kubernetes EndpointSlices: set spec.apiServer")
	case a.Detected.Source != detect.SourceEndpointSlice:
		return result(CheckAPIServer, v1alpha1.CheckPass, "calico-node will use %s from %s",
			net.JoinHostPort(a.Detected.Host, a.Detected.Port), a.Detected.Source)
	case len(a.Detected.Members) > 1:
		return result(CheckAPIServer, v1alpha1.CheckFail,
			"the control plane has %d API server endpoints (%s) and no stable address (no spec.apiServer, kubeadm "+
				"controlPlaneEndpoint or cluster-info server): writing one of them would tie calico-node, Typha and "+
				"calico-node-windows on every node to that one machine. Set spec.apiServer to an address that reaches every "+
				"member (a load balancer or virtual IP, port included)", len(a.Detected.Members), boundedList(a.Detected.Members))
	}
	return result(CheckAPIServer, v1alpha1.CheckWarn,
		"calico-node will use %s, the only API server endpoint (kubernetes EndpointSlice): if the control plane gets more "+
			"members or this one moves, calico-node loses its API; set spec.apiServer to a stable address",
		net.JoinHostPort(a.Detected.Host, a.Detected.Port))
}
