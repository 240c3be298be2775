package preflight

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/probe"
)

// nodePolicies warns about policies that allow node addresses: once pools
// use VXLAN everywhere, host-networked traffic from other nodes reaches pods
// from the nodes' tunnel addresses instead.
func nodePolicies(in Inputs) v1alpha1.PreflightCheck {
	var matched []string
	var tunnels []string
	seenTunnel := map[netip.Addr]bool{}
	names := make([]string, 0, len(in.PolicyCIDRs))
	for name := range in.PolicyCIDRs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, c := range in.PolicyCIDRs[name] {
			prefix, err := netip.ParsePrefix(c)
			if err != nil {
				continue
			}
			hit := false
			for _, n := range in.Nodes {
				if prefix.Contains(n.InternalIP) {
					hit = true
					if n.TunnelIP.IsValid() && !prefix.Contains(n.TunnelIP) && !seenTunnel[n.TunnelIP] {
						seenTunnel[n.TunnelIP] = true
						tunnels = append(tunnels, n.TunnelIP.String()+"/32")
					}
				}
			}
			if hit {
				matched = append(matched, fmt.Sprintf("%s (%s)", name, c))
			}
		}
	}
	if len(matched) == 0 {
		return result(CheckNodePolicies, v1alpha1.CheckPass, "no network policy allows node addresses")
	}
	msg := fmt.Sprintf("%s allow node addresses; with VXLAN everywhere, host-networked traffic from other nodes comes from their tunnel addresses", boundedList(matched))
	if len(tunnels) > 0 {
		msg += ": add " + boundedList(tunnels)
	}
	return result(CheckNodePolicies, v1alpha1.CheckWarn, "%s", msg)
}

// linuxWorkers fails when no schedulable Linux node outside the control
// plane is left for CoreDNS, the Tigera operator and Typha.
func linuxWorkers(in Inputs) v1alpha1.PreflightCheck {
	var workers []string
	linux, cordoned, control := 0, 0, 0
	for _, n := range in.Nodes {
		if n.OS != "" && n.OS != "linux" {
			continue
		}
		linux++
		switch {
		case n.ControlPlane:
			control++
		case n.Unschedulable:
			cordoned++
		default:
			workers = append(workers, n.Name)
		}
	}
	if len(workers) == 0 {
		return result(CheckLinuxWorkers, v1alpha1.CheckFail,
			"no schedulable Linux worker (of %d Linux nodes, %d are control-plane and %d cordoned): CoreDNS, the Tigera operator "+
				"and Typha run on Linux only and need a worker node labelled kubernetes.io/os=linux, not cordoned and without a "+
				"node-role.kubernetes.io/control-plane or master label. Add a Linux worker (or uncordon one) before the first Windows node joins",
			linux, control, cordoned)
	}
	slices.Sort(workers)
	return result(CheckLinuxWorkers, v1alpha1.CheckPass, "%d schedulable Linux workers run CoreDNS, the Tigera operator and Typha: %s",
		len(workers), boundedList(workers))
}

// kubeProxyWindows looks for kube-proxy on Windows nodes: the Tigera
// operator does not install it, and without it Windows pods reach no Service.
func kubeProxyWindows(in Inputs) v1alpha1.PreflightCheck {
	var found []DaemonSetSummary
	for _, d := range in.DaemonSets {
		if d.OnWindows && d.KubeProxy {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return result(CheckKubeProxy, v1alpha1.CheckWarn,
			"no DaemonSet runs kube-proxy on kubernetes.io/os=windows nodes: Windows nodes need kube-proxy in kernelspace mode as a "+
				"HostProcess DaemonSet on the Calico network (sig-windows-tools' kube-proxy-windows, hostprocess/calico/kube-proxy/kube-proxy.yml "+
				"with the image tag of the cluster's Kubernetes version: its image sets KUBE_NETWORK to Calico; any other kube-proxy "+
				"needs env KUBE_NETWORK matching \"Calico\", e.g. Calico.*); apply it before the first Windows node joins")
	}
	for _, d := range found {
		if strings.Contains(strings.ToLower(d.KubeNetwork), "calico") {
			return result(CheckKubeProxy, v1alpha1.CheckPass, "DaemonSet %s/%s runs kube-proxy on Windows nodes with KUBE_NETWORK %q",
				d.Namespace, d.Name, d.KubeNetwork)
		}
	}
	// sig-windows-tools' Calico image sets KUBE_NETWORK=Calico in its start
	// script, and its DaemonSet sets none.
	for _, d := range found {
		if d.KubeNetwork == "" && !d.KubeNetworkFromRef && strings.Contains(strings.ToLower(d.KubeProxyImage), "calico") {
			return result(CheckKubeProxy, v1alpha1.CheckPass,
				"DaemonSet %s/%s runs kube-proxy on Windows nodes from the Calico image %s, which sets KUBE_NETWORK to Calico",
				d.Namespace, d.Name, d.KubeProxyImage)
		}
	}
	d := found[0]
	got := fmt.Sprintf("KUBE_NETWORK %q", d.KubeNetwork)
	switch {
	case d.KubeNetworkFromRef:
		got = "KUBE_NETWORK from a reference winready does not read"
	case d.KubeNetwork == "":
		got = fmt.Sprintf("no KUBE_NETWORK and image %s", d.KubeProxyImage)
	}
	return result(CheckKubeProxy, v1alpha1.CheckWarn,
		"DaemonSet %s/%s runs kube-proxy on Windows nodes with %s: KUBE_NETWORK should match Calico (e.g. Calico.*), the HNS "+
			"network calico-node-windows creates, or kube-proxy programs no Service there", d.Namespace, d.Name, got)
}

// linuxOnlyDaemonSets warns about DaemonSets that select no operating system:
// their Linux pods would be scheduled on Windows nodes and never start.
func linuxOnlyDaemonSets(in Inputs) v1alpha1.PreflightCheck {
	var bad []string
	for _, d := range in.DaemonSets {
		if d.SelectsOS || d.Namespace == calico.SystemNamespace || d.Name == probe.RoundKind.Name {
			continue
		}
		bad = append(bad, d.Namespace+"/"+d.Name)
	}
	if len(bad) == 0 {
		return result(CheckLinuxOnlyDS, v1alpha1.CheckPass, "every DaemonSet outside calico-system selects kubernetes.io/os")
	}
	slices.Sort(bad)
	ns, name, _ := strings.Cut(bad[0], "/")
	return result(CheckLinuxOnlyDS, v1alpha1.CheckWarn,
		"DaemonSets %s select no kubernetes.io/os and would land on Windows nodes: add "+
			"spec.template.spec.nodeSelector: {kubernetes.io/os: linux} to each where it is managed (manifest, Helm values), "+
			"e.g. kubectl -n %s patch ds %s -p '{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"kubernetes.io/os\":\"linux\"}}}}}'",
		boundedList(bad), ns, name)
}
