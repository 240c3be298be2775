// Package detect finds the API server's direct address and the service
// network of a cluster, from the places kubeadm and the API server leave them.
package detect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Where kubeadm and the API server record the cluster's addresses.
const (
	KubeadmConfigNamespace = "kube-system"
	KubeadmConfigName      = "kubeadm-config"
	ClusterInfoNamespace   = "kube-public"
	ClusterInfoName        = "cluster-info"
)

// Endpoint is the API server address calico-node should use.
type Endpoint struct {
	Host string
	Port string
	// Source says where it was found, for the status message.
	Source string
	// Members are the host:port of every ready API server the kubernetes
	// EndpointSlices list, when that is the source: more than one means a
	// control plane of several members, none of them a stable address.
	Members []string
}

// SourceEndpointSlice is the Source of an address taken from the kubernetes
// EndpointSlices: one control-plane member's own address.
const SourceEndpointSlice = "kubernetes EndpointSlice"

// IsAddress reports whether Host is an IP address rather than a DNS name.
// A name can deadlock a fresh Calico install, which needs DNS to come up.
func (e Endpoint) IsAddress() bool {
	_, err := netip.ParseAddr(e.Host)
	return err == nil
}

// ErrNotFound means no source held the value.
var ErrNotFound = errors.New("not found")

// kubeadmClusterConfiguration is the part of kubeadm's ClusterConfiguration
// winready reads.
type kubeadmClusterConfiguration struct {
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint"`
	Networking           struct {
		ServiceSubnet string `json:"serviceSubnet"`
	} `json:"networking"`
}

func readKubeadm(ctx context.Context, r client.Reader) (*kubeadmClusterConfiguration, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: KubeadmConfigNamespace, Name: KubeadmConfigName}, cm); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s/%s: %w", KubeadmConfigNamespace, KubeadmConfigName, err)
	}
	cfg := &kubeadmClusterConfiguration{}
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), cfg); err != nil {
		return nil, fmt.Errorf("parsing %s/%s ClusterConfiguration: %w", KubeadmConfigNamespace, KubeadmConfigName, err)
	}
	return cfg, nil
}

// APIServer finds the API server address: kubeadm's controlPlaneEndpoint,
// then the server of the cluster-info kubeconfig, then the endpoints of the
// kubernetes Service.
func APIServer(ctx context.Context, r client.Reader) (Endpoint, error) {
	kubeadm, err := readKubeadm(ctx, r)
	if err != nil {
		return Endpoint{}, err
	}
	if kubeadm != nil && kubeadm.ControlPlaneEndpoint != "" {
		host, port, err := net.SplitHostPort(kubeadm.ControlPlaneEndpoint)
		if err != nil {
			// kubeadm allows an endpoint without a port; 6443 is its default.
			host, port = kubeadm.ControlPlaneEndpoint, "6443"
		}
		return Endpoint{Host: host, Port: port, Source: "kubeadm-config controlPlaneEndpoint"}, nil
	}
	if ep, ok, err := fromClusterInfo(ctx, r); err != nil || ok {
		return ep, err
	}
	return fromEndpointSlices(ctx, r)
}

func fromClusterInfo(ctx context.Context, r client.Reader) (Endpoint, bool, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ClusterInfoNamespace, Name: ClusterInfoName}, cm); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return Endpoint{}, false, nil
		}
		return Endpoint{}, false, fmt.Errorf("reading %s/%s: %w", ClusterInfoNamespace, ClusterInfoName, err)
	}
	cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("parsing %s/%s kubeconfig: %w", ClusterInfoNamespace, ClusterInfoName, err)
	}
	names := make([]string, 0, len(cfg.Clusters))
	for name := range cfg.Clusters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		u, err := url.Parse(cfg.Clusters[name].Server)
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		return Endpoint{Host: u.Hostname(), Port: port, Source: "cluster-info kubeconfig"}, true, nil
	}
	return Endpoint{}, false, nil
}

func fromEndpointSlices(ctx context.Context, r client.Reader) (Endpoint, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := r.List(ctx, list, client.InNamespace("default"),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return Endpoint{}, fmt.Errorf("listing endpointslices of the kubernetes service: %w", err)
	}
	// Every member is listed: the first is the address written, the count
	// tells the preflight whether it pins a control plane to one machine.
	var found Endpoint
	seen := map[string]bool{}
	slices.SortFunc(list.Items, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range list.Items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var port int32
		for _, p := range s.Ports {
			if p.Port != nil && (p.Name == nil || *p.Name == "https") {
				port = *p.Port
			}
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 || port == 0 {
				continue
			}
			member := net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port)))
			if seen[member] {
				continue
			}
			seen[member] = true
			if found.Host == "" {
				found = Endpoint{Host: ep.Addresses[0], Port: strconv.Itoa(int(port)), Source: SourceEndpointSlice}
			}
			found.Members = append(found.Members, member)
		}
	}
	if found.Host != "" {
		return found, nil
	}
	return Endpoint{}, fmt.Errorf("API server address: %w in kubeadm-config, cluster-info or the kubernetes EndpointSlice; set spec.apiServer", ErrNotFound)
}

// ServiceCIDRs finds the IPv4 service networks: the ServiceCIDR objects the
// API server keeps, then kubeadm's serviceSubnet. An API server before 1.33
// serves no networking.k8s.io/v1 ServiceCIDRs: it has none to read.
func ServiceCIDRs(ctx context.Context, r client.Reader) ([]string, string, error) {
	list := &networkingv1.ServiceCIDRList{}
	err := r.List(ctx, list)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) && !meta.IsNoMatchError(err) {
		return nil, "", fmt.Errorf("listing servicecidrs: %w", err)
	}
	var cidrs []string
	for _, sc := range list.Items {
		if sc.DeletionTimestamp != nil {
			continue
		}
		cidrs = append(cidrs, ipv4Only(sc.Spec.CIDRs)...)
	}
	if len(cidrs) > 0 {
		slices.Sort(cidrs)
		return slices.Compact(cidrs), "ServiceCIDR objects", nil
	}
	kubeadm, err := readKubeadm(ctx, r)
	if err != nil {
		return nil, "", err
	}
	if kubeadm != nil {
		if cidrs := ipv4Only([]string{kubeadm.Networking.ServiceSubnet}); len(cidrs) > 0 {
			return cidrs, "kubeadm-config serviceSubnet", nil
		}
	}
	return nil, "", fmt.Errorf("service network: %w in ServiceCIDR objects or kubeadm-config; set spec.serviceCIDRs", ErrNotFound)
}

// ipv4Only keeps the IPv4 prefixes of a comma-separated or listed set, in
// canonical form.
func ipv4Only(in []string) []string {
	var out []string
	for _, s := range in {
		for _, part := range strings.Split(s, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(part))
			if err == nil && p.Addr().Is4() {
				out = append(out, p.Masked().String())
			}
		}
	}
	return out
}
