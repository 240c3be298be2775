package preflight

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
)

// Discovery is the part of the discovery client the checks need.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// CalicoAPI is what discovery says about Calico's API: the resources served
// under projectcalico.org/v3 (native v3 CRDs serve every kind; the aggregated
// Calico API server serves most, but not ipamblocks) and under
// crd.projectcalico.org/v1 (the CRDs underneath the API server).
type CalicoAPI struct {
	V3 map[string]bool
	V1 map[string]bool
}

// crdGroupVersion is the group of Calico's own CRDs under the API server.
const crdGroupVersion = "crd.projectcalico.org/v1"

// DiscoverCalicoAPI asks discovery, every time it is called, which Calico
// resources are served, so that a Calico API server installed or removed
// since the last look is seen.
func DiscoverCalicoAPI(d Discovery) (CalicoAPI, error) {
	api := CalicoAPI{}
	var err error
	if api.V3, err = served(d, calicov3.SchemeGroupVersion.String()); err != nil {
		return api, err
	}
	api.V1, err = served(d, crdGroupVersion)
	return api, err
}

func served(d Discovery, gv string) (map[string]bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gv)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return map[string]bool{}, nil
		}
		return nil, fmt.Errorf("discovering %s: %w", gv, err)
	}
	out := make(map[string]bool, len(list.APIResources))
	for _, r := range list.APIResources {
		out[r.Name] = true
	}
	return out, nil
}

// Served reports whether projectcalico.org/v3 serves the resources a
// migration reads and writes.
func (a CalicoAPI) Served() bool { return a.V3["ippools"] && a.V3["ipamconfigurations"] }

// Gather reads what the checks look at. r should read from the API server:
// these objects are read once per preflight and not worth caching.
func Gather(ctx context.Context, r client.Reader, d Discovery, inst *operatorv1.Installation) (Inputs, error) {
	in := Inputs{Installation: inst}
	// The cached Installation has no managedFields: Helm's field manager is
	// read from the API server.
	if full, err := calico.GetInstallation(ctx, r); err != nil {
		return in, err
	} else if full != nil {
		in.HelmEvidence, in.HelmRelease = HelmOwnership(full)
	}
	overlay, err := calico.GetOverlay(ctx, r)
	if err != nil {
		return in, err
	}
	in.Overlay, in.Installation = overlay, calico.Effective(inst, overlay)
	// The checks read the Installation the operator renders.
	inst = in.Installation
	api, err := DiscoverCalicoAPI(d)
	if err != nil {
		return in, err
	}
	in.CalicoAPIServed = api.Served()
	if in.Nodes, err = listNodes(ctx, r); err != nil {
		return in, err
	}
	if inst != nil && !inst.Spec.KubernetesProvider.IsOpenShift() {
		// OpenShift is refused by the KubernetesProvider check, and winready
		// has no rights in openshift-dns.
		in.DNSService = calico.DNSService(inst.Spec.KubernetesProvider)
		if err := getOptional(ctx, r, in.DNSService, &corev1.Service{}, &in.DNSServiceFound); err != nil {
			return in, err
		}
	}
	if err := gatherDaemonSets(ctx, r, &in); err != nil {
		return in, err
	}
	// An operator without the ImageSet CRD uses image tags.
	sets := &operatorv1.ImageSetList{}
	if err := r.List(ctx, sets); err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
		return in, fmt.Errorf("listing imagesets: %w", err)
	}
	in.ImageSets = sets.Items
	if !in.CalicoAPIServed {
		return in, nil
	}
	err = gatherCalico(ctx, r, api, &in)
	return in, err
}

// gatherCalico reads Calico's own objects through projectcalico.org/v3, which
// the caller knows is served.
func gatherCalico(ctx context.Context, r client.Reader, api CalicoAPI, in *Inputs) (err error) {
	if in.Pools, err = calico.ListIPPools(ctx, r); err != nil {
		return err
	}
	felix := &calicov3.FelixConfiguration{}
	var found bool
	if err := getOptional(ctx, r, client.ObjectKey{Name: "default"}, felix, &found); err != nil {
		return err
	}
	if found {
		in.Felix = felix
	}
	bgp := &calicov3.BGPConfiguration{}
	if err := getOptional(ctx, r, client.ObjectKey{Name: "default"}, bgp, &found); err != nil {
		return err
	}
	if found {
		in.BGPConfig = bgp
	}
	if err := gatherPolicies(ctx, r, in); err != nil {
		return err
	}
	if err := gatherBorrowed(ctx, r, api, in); err != nil {
		return err
	}
	peers := &calicov3.BGPPeerList{}
	if err := r.List(ctx, peers); err != nil {
		return fmt.Errorf("listing bgppeers: %w", err)
	}
	for _, p := range peers.Items {
		in.BGPPeers = append(in.BGPPeers, p.Name)
	}
	return nil
}

func getOptional(ctx context.Context, r client.Reader, key client.ObjectKey, obj client.Object, found *bool) error {
	err := r.Get(ctx, key, obj)
	*found = err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return nil
}

// tunnelAnnotation is where Calico records a node's VXLAN tunnel address.
const tunnelAnnotation = "projectcalico.org/IPv4VXLANTunnelAddr"

// listPages lists a kind a page at a time, handing each page to visit.
func listPages(ctx context.Context, r client.Reader, list client.ObjectList, visit func() error, opts ...client.ListOption) error {
	for cont := ""; ; {
		if err := r.List(ctx, list, append(opts, client.Limit(500), client.Continue(cont))...); err != nil {
			return err
		}
		if err := visit(); err != nil {
			return err
		}
		if cont = list.GetContinue(); cont == "" {
			return nil
		}
	}
}

// listNodes reads every node's addresses and whether it is a Linux worker;
// nodes without an InternalIP are kept, they still count as workers.
func listNodes(ctx context.Context, r client.Reader) ([]NodeAddresses, error) {
	var out []NodeAddresses
	list := &corev1.NodeList{}
	err := listPages(ctx, r, list, func() error {
		for _, n := range list.Items {
			na := NodeAddresses{Name: n.Name, OS: n.Labels[calico.OSLabel], Unschedulable: n.Spec.Unschedulable}
			_, cp := n.Labels[roleControlPlane]
			_, master := n.Labels[roleMaster]
			na.ControlPlane = cp || master
			for _, a := range n.Status.Addresses {
				if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is4() {
					na.InternalIP = ip
					break
				}
			}
			na.TunnelIP, _ = netip.ParseAddr(n.Annotations[tunnelAnnotation])
			out = append(out, na)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return out, nil
}

// gatherDaemonSets summarises every DaemonSet and, from the same list, reads
// the VXLAN overrides on calico-node.
func gatherDaemonSets(ctx context.Context, r client.Reader, in *Inputs) error {
	list := &appsv1.DaemonSetList{}
	err := listPages(ctx, r, list, func() error {
		for i := range list.Items {
			ds := &list.Items[i]
			in.DaemonSets = append(in.DaemonSets, SummarizeDaemonSet(ds))
			if ds.Namespace != calico.SystemNamespace || ds.Name != calico.NodeDaemonSet {
				continue
			}
			for _, name := range []string{envVXLANPort, envVXLANVNI} {
				if v, ok := calico.ContainerEnv(ds, calico.NodeContainer, name); ok {
					if in.CalicoNodeEnv == nil {
						in.CalicoNodeEnv = map[string]string{}
					}
					in.CalicoNodeEnv[name] = v
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing daemonsets: %w", err)
	}
	return nil
}

func gatherPolicies(ctx context.Context, r client.Reader, in *Inputs) error {
	in.PolicyCIDRs = map[string][]string{}
	k8s := &networkingv1.NetworkPolicyList{}
	if err := listPages(ctx, r, k8s, func() error {
		for _, p := range k8s.Items {
			var cidrs []string
			for _, rule := range p.Spec.Ingress {
				for _, peer := range rule.From {
					if peer.IPBlock != nil {
						cidrs = append(cidrs, peer.IPBlock.CIDR)
					}
				}
			}
			for _, rule := range p.Spec.Egress {
				for _, peer := range rule.To {
					if peer.IPBlock != nil {
						cidrs = append(cidrs, peer.IPBlock.CIDR)
					}
				}
			}
			if len(cidrs) > 0 {
				in.PolicyCIDRs["NetworkPolicy "+p.Namespace+"/"+p.Name] = cidrs
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("listing networkpolicies: %w", err)
	}
	calicoNP := &calicov3.NetworkPolicyList{}
	if err := listPages(ctx, r, calicoNP, func() error {
		for _, p := range calicoNP.Items {
			if cidrs := ruleNets(p.Spec.Ingress, p.Spec.Egress); len(cidrs) > 0 {
				in.PolicyCIDRs["Calico NetworkPolicy "+p.Namespace+"/"+p.Name] = cidrs
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("listing calico networkpolicies: %w", err)
	}
	global := &calicov3.GlobalNetworkPolicyList{}
	if err := listPages(ctx, r, global, func() error {
		for _, p := range global.Items {
			if cidrs := ruleNets(p.Spec.Ingress, p.Spec.Egress); len(cidrs) > 0 {
				in.PolicyCIDRs["GlobalNetworkPolicy "+p.Name] = cidrs
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("listing globalnetworkpolicies: %w", err)
	}
	return nil
}

// ruleNets are the source nets of ingress rules and destination nets of
// egress rules: the sides where a node address would be the peer.
func ruleNets(ingress, egress []calicov3.Rule) []string {
	var cidrs []string
	for _, rule := range ingress {
		cidrs = append(cidrs, rule.Source.Nets...)
	}
	for _, rule := range egress {
		cidrs = append(cidrs, rule.Destination.Nets...)
	}
	return cidrs
}

func gatherBorrowed(ctx context.Context, r client.Reader, api CalicoAPI, in *Inputs) error {
	in.Borrowed = map[string]int{}
	count := func(blocks []calicov3.IPAMBlock) {
		for _, b := range blocks {
			if cidr, err := netip.ParsePrefix(b.Spec.CIDR); err == nil {
				in.BlockCIDRs = append(in.BlockCIDRs, cidr)
			}
			if b.Spec.Affinity == nil {
				continue
			}
			host, ok := strings.CutPrefix(*b.Spec.Affinity, "host:")
			if !ok {
				continue
			}
			if cidr, err := netip.ParsePrefix(b.Spec.CIDR); err == nil {
				free := 0
				for _, a := range b.Spec.Allocations {
					if a == nil {
						free++
					}
				}
				in.Blocks = append(in.Blocks, BlockUsage{CIDR: cidr, Node: host, Free: free})
			}
			for _, idx := range b.Spec.Allocations {
				if idx == nil || *idx < 0 || *idx >= len(b.Spec.Attributes) {
					continue
				}
				if node := b.Spec.Attributes[*idx].ActiveOwnerAttrs["node"]; node != "" && node != host {
					in.Borrowed[node]++
				}
			}
		}
	}
	readable, err := EachIPAMBlockPage(ctx, r, api, func(blocks []calicov3.IPAMBlock) error { count(blocks); return nil })
	in.BlocksUnreadable = !readable
	return err
}

// EachIPAMBlockPage calls visit with every page of IPAM blocks, read through
// projectcalico.org/v3 where it serves them, else as crd.projectcalico.org/v1
// IPAMBlocks (the Calico API server serves no ipamblocks). It returns false
// when neither serves them.
func EachIPAMBlockPage(ctx context.Context, r client.Reader, api CalicoAPI, visit func([]calicov3.IPAMBlock) error) (bool, error) {
	switch {
	case api.V3["ipamblocks"]:
		blocks := &calicov3.IPAMBlockList{}
		if err := listPages(ctx, r, blocks, func() error { return visit(blocks.Items) }); err != nil {
			return true, fmt.Errorf("listing ipamblocks: %w", err)
		}
	case api.V1["ipamblocks"]:
		// The Calico API server does not serve IPAM blocks; its CRDs hold them
		// with the same fields.
		blocks := &unstructured.UnstructuredList{}
		blocks.SetGroupVersionKind(schema.GroupVersionKind{Group: "crd.projectcalico.org", Version: "v1", Kind: "IPAMBlockList"})
		err := listPages(ctx, r, blocks, func() error {
			typed := make([]calicov3.IPAMBlock, len(blocks.Items))
			for i := range blocks.Items {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(blocks.Items[i].Object, &typed[i]); err != nil {
					return fmt.Errorf("reading ipamblock %s: %w", blocks.Items[i].GetName(), err)
				}
			}
			return visit(typed)
		})
		if err != nil {
			return true, fmt.Errorf("listing ipamblocks.crd.projectcalico.org: %w", err)
		}
	default:
		return false, nil
	}
	return true, nil
}
