// Package preflight decides, before the first change, whether this Calico
// cluster can be made Windows-ready, and tells a person what to fix when not.
package preflight

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/probe"
)

// Check names.
const (
	CheckCalicoAPI      = "CalicoAPI"
	CheckIPIPPools      = "IPIPPools"
	CheckIPv6Pools      = "IPv6Pools"
	CheckVXLANSettings  = "VXLANSettings"
	CheckBGPPeers       = "BGPPeers"
	CheckServiceAdverts = "ServiceAdvertisement"
	CheckBlockSize      = "PodsPerWindowsNode"
	CheckKubeDNS        = "KubeDNS"
	CheckProvider       = "KubernetesProvider"
	CheckDataplane      = "LinuxDataplane"
	CheckCNI            = "CNIPlugin"
	CheckLBPools        = "LoadBalancerPools"
	CheckOverlay        = "OverlayInstallation"
	CheckNodePolicies   = "PoliciesOnNodeAddresses"
	CheckBorrowed       = "BorrowedAddresses"
	CheckCalicoVersion  = "CalicoVersion"
	CheckUnencapsulated = "UnencapsulatedPools"
	CheckForeignPools   = "PoolsOutsideInstallation"
	CheckLinuxWorkers   = "LinuxWorkers"
	CheckIPAMCapacity   = "WindowsIPAMCapacity"
	// CheckAffinityCapacity is the Linux nodes' address capacity once
	// strictAffinity stops borrowing.
	CheckAffinityCapacity = "StrictAffinityCapacity"
	CheckKubeProxy        = "KubeProxyWindows"
	CheckLinuxOnlyDS      = "LinuxOnlyDaemonSets"
)

// Windows VXLAN limits: HNS only uses UDP 4789 and VNIs from 4096.
const (
	windowsVXLANPort  = 4789
	windowsMinVNI     = 4096
	defaultBlockSize  = 26
	reservedPerWindow = 4 // network, gateway, service address and broadcast
)

// Environment variables of calico-node that override FelixConfiguration.
const (
	envVXLANPort = "FELIX_VXLANPORT"
	envVXLANVNI  = "FELIX_VXLANVNI"
)

// Node role labels of control-plane nodes, current and legacy.
const (
	roleControlPlane = "node-role.kubernetes.io/control-plane"
	roleMaster       = "node-role.kubernetes.io/master"
)

// Inputs is what the checks look at, gathered from the cluster.
type Inputs struct {
	// Installation is the effective Installation: "default" with the
	// overlay merged over it, as the Tigera operator renders it.
	Installation *operatorv1.Installation
	// Overlay is Installation "overlay"; nil when absent.
	Overlay *operatorv1.Installation
	// CalicoAPIServed is true when projectcalico.org/v3 serves IPPools and
	// IPAMConfigurations (Calico API server or native v3 CRDs).
	CalicoAPIServed bool
	// Felix is FelixConfiguration "default"; nil when absent.
	Felix *calicov3.FelixConfiguration
	// BGPConfig is BGPConfiguration "default"; nil when absent.
	BGPConfig *calicov3.BGPConfiguration
	// BGPPeers are the names of every BGPPeer.
	BGPPeers []string
	// DNSService is the cluster DNS Service the Tigera operator's Windows
	// controller reads for the Installation's kubernetesProvider, and
	// DNSServiceFound whether it exists.
	DNSService      client.ObjectKey
	DNSServiceFound bool
	// Nodes are every node's addresses, VXLAN tunnel address and what
	// decides whether it runs Linux workloads.
	Nodes []NodeAddresses
	// PolicyCIDRs are the ipBlock and nets CIDRs of Kubernetes and Calico
	// network policies, by "kind namespace/name".
	PolicyCIDRs map[string][]string
	// Borrowed counts, by node, the addresses its pods use from blocks
	// affine to another node.
	Borrowed map[string]int
	// BlocksUnreadable is true when no API group serves IPAM blocks.
	BlocksUnreadable bool
	// Pools are every projectcalico.org/v3 IPPool in the cluster.
	Pools []calicov3.IPPool
	// BlockCIDRs are the CIDRs of every IPAM block, allocated to a node or not.
	BlockCIDRs []netip.Prefix
	// Blocks are the IPAM blocks affine to a node, with the node and how
	// many of their addresses are free.
	Blocks []BlockUsage
	// DaemonSets are every DaemonSet in the cluster, reduced to what the
	// Windows node checks read.
	DaemonSets []DaemonSetSummary
	// CalicoNodeEnv holds FELIX_VXLANPORT and FELIX_VXLANVNI where the
	// calico-node container of calico-system/calico-node sets them.
	CalicoNodeEnv map[string]string
	// ExpectedWindowsNodes is spec.windowsNodes.expected; nil when unset.
	ExpectedWindowsNodes *int32
	// APIServer is where the address for calico-node comes from.
	APIServer APIServerInputs
	// ImageSets are every ImageSet in the cluster.
	ImageSets []operatorv1.ImageSet
	// HelmEvidence says how a Helm release marks Installation default ("" when
	// none does), and HelmRelease is that release's name when annotated.
	HelmEvidence, HelmRelease string
}

// BlockUsage is an IPAM block affine to a node.
type BlockUsage struct {
	CIDR netip.Prefix
	Node string
	Free int
}

// NodeAddresses are one node's InternalIP and Calico VXLAN tunnel address,
// and what decides whether it is a Linux worker.
type NodeAddresses struct {
	Name       string
	InternalIP netip.Addr
	TunnelIP   netip.Addr
	// OS is the kubernetes.io/os label; "" when the node has none.
	OS string
	// Unschedulable is spec.unschedulable (a cordoned node).
	Unschedulable bool
	// ControlPlane is true for nodes labelled with a control-plane or master role.
	ControlPlane bool
}

// DaemonSetSummary is what the Windows node checks read from a DaemonSet's
// pod template.
type DaemonSetSummary struct {
	Namespace, Name string
	// SelectsOS is true when the nodeSelector or every term of the required
	// node affinity constrains kubernetes.io/os.
	SelectsOS bool
	// OnWindows is true when the pod template targets kubernetes.io/os=windows.
	OnWindows bool
	// KubeProxy is true when a container's image, command or arguments name
	// kube-proxy; KubeProxyImage is that container's image.
	KubeProxy      bool
	KubeProxyImage string
	// KubeNetwork is the first literal KUBE_NETWORK value of its containers.
	KubeNetwork string
	// KubeNetworkFromRef is true when a container sets KUBE_NETWORK from a
	// ConfigMap, Secret or field reference.
	KubeNetworkFromRef bool
}

// SummarizeDaemonSet reduces a DaemonSet to what the checks read.
func SummarizeDaemonSet(ds *appsv1.DaemonSet) DaemonSetSummary {
	spec := &ds.Spec.Template.Spec
	s := DaemonSetSummary{Namespace: ds.Namespace, Name: ds.Name}
	// The nodeSelector and the required affinity both have to allow Windows,
	// and one of them has to ask for it.
	nsOS, nsHasOS := spec.NodeSelector[calico.OSLabel]
	allowsWindows, targetsWindows := !nsHasOS || nsOS == calico.OSWindows, nsHasOS && nsOS == calico.OSWindows
	s.SelectsOS = nsHasOS
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		everyTermOS, anyTermAllows, anyTermTargets := len(terms) > 0, false, false
		for _, t := range terms {
			hasOS, windows := false, false
			for _, e := range t.MatchExpressions {
				if e.Key != calico.OSLabel {
					continue
				}
				hasOS = true
				windows = windows || e.Operator == corev1.NodeSelectorOpIn && slices.Contains(e.Values, calico.OSWindows)
			}
			everyTermOS = everyTermOS && hasOS
			anyTermAllows = anyTermAllows || !hasOS || windows
			anyTermTargets = anyTermTargets || windows
		}
		s.SelectsOS = s.SelectsOS || everyTermOS
		if len(terms) > 0 {
			allowsWindows = allowsWindows && anyTermAllows
			targetsWindows = targetsWindows || anyTermTargets
		}
	}
	s.OnWindows = allowsWindows && targetsWindows
	namesKubeProxy := func(arg string) bool { return strings.Contains(arg, "kube-proxy") }
	for _, c := range spec.Containers {
		if !s.KubeProxy && (namesKubeProxy(c.Image) || slices.ContainsFunc(c.Command, namesKubeProxy) || slices.ContainsFunc(c.Args, namesKubeProxy)) {
			s.KubeProxy, s.KubeProxyImage = true, c.Image
		}
		for _, e := range c.Env {
			if e.Name != "KUBE_NETWORK" {
				continue
			}
			if e.ValueFrom != nil {
				s.KubeNetworkFromRef = true
			} else if s.KubeNetwork == "" {
				s.KubeNetwork = e.Value
			}
		}
	}
	return s
}

// Evaluate runs every check. It is pure, so each rule is table-tested.
func Evaluate(in Inputs, spec v1alpha1.PreflightSpec) []v1alpha1.PreflightCheck {
	checks := []v1alpha1.PreflightCheck{calicoAPI(in), kubernetesProvider(in), overlayInstallation(in), helmManaged(in, spec)}
	checks = append(checks, cniPlugin(in), linuxDataplane(in), ipipPools(in), ipv6Pools(in), unencapsulatedPools(in), loadBalancerPools(in))
	if in.CalicoAPIServed {
		checks = append(checks, foreignPools(in), vxlanSettings(in), bgpPeers(in, spec), serviceAdverts(in, spec))
	}
	checks = append(checks, apiServerAddress(in), imageSetWindows(in), blockSize(in), kubeDNS(in), nodePolicies(in), borrowed(in), calicoVersion(in, spec))
	// The first Windows node: Linux workers, addresses, kube-proxy, DaemonSets.
	checks = append(checks, linuxWorkers(in))
	if in.CalicoAPIServed {
		checks = append(checks, affinityCapacity(in), windowsIPAMCapacity(in))
	}
	checks = append(checks, kubeProxyWindows(in), linuxOnlyDaemonSets(in))
	return checks
}

// Failed returns the checks that failed.
func Failed(checks []v1alpha1.PreflightCheck) []v1alpha1.PreflightCheck {
	var failed []v1alpha1.PreflightCheck
	for _, c := range checks {
		if c.Result == v1alpha1.CheckFail {
			failed = append(failed, c)
		}
	}
	return failed
}

// Warnings returns the checks that warned.
func Warnings(checks []v1alpha1.PreflightCheck) []v1alpha1.PreflightCheck {
	var warned []v1alpha1.PreflightCheck
	for _, c := range checks {
		if c.Result == v1alpha1.CheckWarn {
			warned = append(warned, c)
		}
	}
	return warned
}

// maxMessage is the CRD's bound on a check's message, in characters.
const maxMessage = 2048

func result(name string, r v1alpha1.CheckResult, format string, args ...any) v1alpha1.PreflightCheck {
	msg := fmt.Sprintf(format, args...)
	// Long names can push a bounded list past the CRD's bound, and the status
	// would then not be written at all.
	if runes := []rune(msg); len(runes) > maxMessage {
		msg = string(runes[:maxMessage-1]) + "…"
	}
	return v1alpha1.PreflightCheck{Name: name, Result: r, Message: msg}
}

func calicoAPI(in Inputs) v1alpha1.PreflightCheck {
	if in.CalicoAPIServed {
		return result(CheckCalicoAPI, v1alpha1.CheckPass, "projectcalico.org/v3 is served")
	}
	return result(CheckCalicoAPI, v1alpha1.CheckFail,
		"projectcalico.org/v3 is not served: the Tigera operator will not change IP pools without it. "+
			"Install the Calico API server (kubectl create -f apiserver.yaml with an APIServer named default) "+
			"or run Calico with native projectcalico.org/v3 CRDs, then wait for TigeraStatus apiserver Available")
}

// overlayInstallation fails on fields of Installation "overlay" that win
// over what winready writes into "default": the Tigera operator would render
// the overlay's value and winready would wait for a change that never comes
// (with bgp Enabled there, calico-node keeps BIRD forever), and a rollback
// could not put the originals back either.
func overlayInstallation(in Inputs) v1alpha1.PreflightCheck {
	if in.Overlay == nil {
		return result(CheckOverlay, v1alpha1.CheckPass, "no Installation overlay")
	}
	conflicts := calico.OverlayConflicts(in.Overlay)
	if len(conflicts) == 0 {
		return result(CheckOverlay, v1alpha1.CheckPass,
			"Installation overlay sets none of the fields winready changes (calicoNetwork.bgp, windowsDataplane, ipPools, serviceCIDRs)")
	}
	var sets []string
	calicoNetwork := map[string]any{}
	fix := map[string]any{}
	for _, c := range conflicts {
		sets = append(sets, fmt.Sprintf("spec.%s: %s", c.Path, c.Value))
		if field, ok := strings.CutPrefix(c.Path, "calicoNetwork."); ok {
			calicoNetwork[field] = nil
		} else {
			fix[c.Path] = nil
		}
	}
	if len(calicoNetwork) > 0 {
		fix["calicoNetwork"] = calicoNetwork
	}
	patch, _ := json.Marshal(map[string]any{"spec": fix})
	return result(CheckOverlay, v1alpha1.CheckFail,
		"Installation overlay sets %s; the Tigera operator merges the overlay over Installation default, so these win over "+
			"what winready writes into default and the migration would wait for a change that never comes. Remove them from "+
			"the overlay where it is managed (winready changes them in default, and restores them there on rollback), e.g. "+
			"kubectl patch installation overlay --type merge -p '%s'", strings.Join(sets, ", "), patch)
}

// cniPlugin refuses what makes the Tigera operator reject VXLAN pools: a CNI
// plugin other than Calico's ("... is invalid for ipPool.encapsulation when
// using non-Calico CNI, should be None") or Calico CNI with host-local IPAM
// ("VXLAN is invalid for ipPool.encapsulation with Calico CNI and HostLocal
// IPAM"), both from its validation.go.
func cniPlugin(in Inputs) v1alpha1.PreflightCheck {
	if in.Installation == nil || in.Installation.Spec.CNI == nil {
		return result(CheckCNI, v1alpha1.CheckPass, "spec.cni unset: the Tigera operator defaults it")
	}
	cni := in.Installation.Spec.CNI
	if cni.Type != "" && cni.Type != operatorv1.PluginCalico {
		return result(CheckCNI, v1alpha1.CheckFail,
			"the Installation's spec.cni.type is %s: the Tigera operator accepts only encapsulation None and no BGP with a CNI "+
				"other than Calico's, so pools cannot move to VXLAN; Windows nodes on this cluster follow that CNI's own Windows "+
				"support, not this migration", cni.Type)
	}
	if cni.IPAM != nil && cni.IPAM.Type == operatorv1.IPAMPluginHostLocal {
		return result(CheckCNI, v1alpha1.CheckFail,
			"the Installation's spec.cni.ipam.type is HostLocal: the Tigera operator rejects VXLAN pools with it (\"VXLAN is invalid "+
				"for ipPool.encapsulation with Calico CNI and HostLocal IPAM\"), and Windows nodes need Calico IPAM and strictAffinity; "+
				"moving to Calico IPAM is a reinstall of the pod network, outside this migration")
	}
	return result(CheckCNI, v1alpha1.CheckPass, "Calico CNI with Calico IPAM")
}

// linuxDataplane refuses the VPP dataplane: the Tigera operator's validation
// rejects bgp Disabled with it ("VPP requires BGP to be enabled").
func linuxDataplane(in Inputs) v1alpha1.PreflightCheck {
	dp := operatorv1.LinuxDataplaneIptables
	if in.Installation != nil && in.Installation.Spec.CalicoNetwork != nil && in.Installation.Spec.CalicoNetwork.LinuxDataplane != nil {
		dp = *in.Installation.Spec.CalicoNetwork.LinuxDataplane
	}
	if dp == operatorv1.LinuxDataplaneVPP {
		return result(CheckDataplane, v1alpha1.CheckFail,
			"the Installation's spec.calicoNetwork.linuxDataplane is VPP: the Tigera operator rejects bgp Disabled with it (\"VPP requires "+
				"BGP to be enabled\") and renders nothing, so this cluster cannot take Windows nodes with Calico's VXLAN; move it to the "+
				"Iptables, Nftables or BPF dataplane first")
	}
	return result(CheckDataplane, v1alpha1.CheckPass, "Linux dataplane %s", dp)
}

// loadBalancerPools fails on pools for LoadBalancer addresses: Calico's
// IPPool validation keeps them unencapsulated, and their addresses reach the
// network only over BGP, so BGP cannot be turned off while they exist.
func loadBalancerPools(in Inputs) v1alpha1.PreflightCheck {
	var lb []string
	seen := map[string]bool{}
	for _, p := range calico.IPPools(in.Installation) {
		if slices.Contains(p.AllowedUses, operatorv1.IPPoolAllowedUseLoadBalancer) {
			seen[p.Name] = true
			lb = append(lb, fmt.Sprintf("%s (%s, in the Installation)", p.Name, p.CIDR))
		}
	}
	for _, p := range in.Pools {
		if !seen[p.Name] && slices.Contains(p.Spec.AllowedUses, calicov3.IPPoolAllowedUseLoadBalancer) {
			lb = append(lb, fmt.Sprintf("%s (%s)", p.Name, p.Spec.CIDR))
		}
	}
	if len(lb) == 0 {
		return result(CheckLBPools, v1alpha1.CheckPass, "no IP pool serves LoadBalancer addresses")
	}
	return result(CheckLBPools, v1alpha1.CheckFail,
		"IP pools %s serve LoadBalancer addresses: Calico keeps such pools unencapsulated (VXLAN is rejected for them) and "+
			"advertises their addresses over BGP, so BGP cannot be turned off while they exist. Move those Services to another "+
			"load balancer implementation and delete the pools (or remove them from the Installation's spec.calicoNetwork.ipPools), "+
			"or keep this cluster on BGP without Windows nodes", boundedList(lb))
}

func ipipPools(in Inputs) v1alpha1.PreflightCheck {
	var bad []string
	for _, p := range calico.IPPools(in.Installation) {
		if calico.IsIPIP(p.Encapsulation) {
			bad = append(bad, fmt.Sprintf("%s (%s, %s)", p.Name, p.CIDR, p.Encapsulation))
		}
	}
	if len(bad) > 0 {
		return result(CheckIPIPPools, v1alpha1.CheckFail,
			"Windows has no IP-in-IP; these Installation pools use it: %s. Migrate them to VXLAN or VXLANCrossSubnet first",
			strings.Join(bad, ", "))
	}
	return result(CheckIPIPPools, v1alpha1.CheckPass, "no pool uses IP-in-IP")
}

func ipv6Pools(in Inputs) v1alpha1.PreflightCheck {
	var v6 []string
	for _, p := range calico.IPPools(in.Installation) {
		if !calico.IsIPv4(p.CIDR) {
			v6 = append(v6, p.CIDR)
		}
	}
	if len(v6) > 0 {
		return result(CheckIPv6Pools, v1alpha1.CheckWarn,
			"Windows nodes get IPv4 addresses only; pods there will have none from %s", strings.Join(v6, ", "))
	}
	return result(CheckIPv6Pools, v1alpha1.CheckPass, "all pools are IPv4")
}

// unencapsulatedPools fails on Installation pools without encapsulation: in
// BIRD cluster routing mode the Tigera operator rejects bgp Disabled while
// any pool, of either family, is unencapsulated, and nothing is rendered.
func unencapsulatedPools(in Inputs) v1alpha1.PreflightCheck {
	if in.Installation == nil {
		return result(CheckUnencapsulated, v1alpha1.CheckPass, "no Installation pools")
	}
	if cn := in.Installation.Spec.CalicoNetwork; cn != nil && cn.ClusterRoutingMode != nil &&
		*cn.ClusterRoutingMode == operatorv1.ClusterRoutingModeFelix {
		return result(CheckUnencapsulated, v1alpha1.CheckPass, "Felix programs cluster routes: unencapsulated pools do not need BGP")
	}
	var bad []string
	for _, p := range calico.IPPools(in.Installation) {
		if slices.Contains(p.AllowedUses, operatorv1.IPPoolAllowedUseLoadBalancer) {
			continue // LoadBalancerPools: they cannot take VXLAN
		}
		enc := p.Encapsulation
		if enc == "" && !calico.IsIPv4(p.CIDR) {
			enc = operatorv1.EncapsulationNone // the operator's default for IPv6 pools
		}
		if enc != operatorv1.EncapsulationNone {
			continue
		}
		fix := "set its encapsulation to VXLAN in the Installation"
		if !calico.IsIPv4(p.CIDR) {
			fix = "Windows is IPv4 only: give this IPv6 pool encapsulation VXLAN in the Installation, or remove it (a person decides)"
		}
		bad = append(bad, fmt.Sprintf("%s (%s): %s", p.Name, p.CIDR, fix))
	}
	if len(bad) > 0 {
		return result(CheckUnencapsulated, v1alpha1.CheckFail,
			"BGP cannot be turned off while these Installation pools are unencapsulated (the Tigera operator rejects it: "+
				"\"unencapsulated IP pools require that BGP is enabled\"): %s", boundedList(bad))
	}
	return result(CheckUnencapsulated, v1alpha1.CheckPass, "every Installation pool is encapsulated")
}

// foreignPools fails on workload pools the Installation does not describe
// that are not VXLAN always: the Tigera operator changes only the pools it
// owns, so an Installation patch would never reach them.
func foreignPools(in Inputs) v1alpha1.PreflightCheck {
	var bad []string
	for i := range in.Pools {
		p := &in.Pools[i]
		if calico.OwnedByOperator(p, in.Installation) || !calico.ServesWindowsWorkloads(p) {
			continue
		}
		if calico.PoolVXLANMode(p) == calicov3.VXLANModeAlways && (p.Spec.IPIPMode == "" || p.Spec.IPIPMode == calicov3.IPIPModeNever) {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s (%s, vxlanMode %s, ipipMode %s)", p.Name, p.Spec.CIDR,
			calico.PoolVXLANMode(p), orNever(string(p.Spec.IPIPMode))))
	}
	if len(bad) > 0 {
		return result(CheckForeignPools, v1alpha1.CheckFail,
			"these IPPools are not in the Installation, so winready cannot change them, and Windows needs VXLAN always: %s. "+
				"Move each under the Installation (add it to spec.calicoNetwork.ipPools with the same name and CIDR and "+
				"encapsulation VXLAN; the Tigera operator then owns it), or set vxlanMode: Always and ipipMode: Never on it "+
				"where it is managed (e.g. in Git)", boundedList(bad))
	}
	return result(CheckForeignPools, v1alpha1.CheckPass, "every workload pool is in the Installation or already VXLAN always")
}

func orNever(mode string) string {
	if mode == "" {
		return "Never"
	}
	return mode
}

func vxlanSettings(in Inputs) v1alpha1.PreflightCheck {
	port, vni := windowsVXLANPort, windowsMinVNI
	if f := in.Felix; f != nil {
		if f.Spec.VXLANPort != nil {
			port = *f.Spec.VXLANPort
		}
		if f.Spec.VXLANVNI != nil {
			vni = *f.Spec.VXLANVNI
		}
	}
	var problems []string
	if port != windowsVXLANPort || vni < windowsMinVNI {
		problems = append(problems, fmt.Sprintf("FelixConfiguration default has vxlanPort %d and vxlanVNI %d; Windows needs port %d and a VNI of %d or more: "+
			"set spec.vxlanPort and spec.vxlanVNI (or remove them for the defaults)", port, vni, windowsVXLANPort, windowsMinVNI))
	}
	// Environment variables on calico-node override the FelixConfiguration.
	ds := calico.SystemNamespace + "/" + calico.NodeDaemonSet
	for _, env := range []struct {
		name string
		ok   func(int) bool
		want string
		into *int
	}{
		{envVXLANPort, func(v int) bool { return v == windowsVXLANPort }, fmt.Sprintf("port %d", windowsVXLANPort), &port},
		{envVXLANVNI, func(v int) bool { return v >= windowsMinVNI }, fmt.Sprintf("a VNI of %d or more", windowsMinVNI), &vni},
	} {
		raw, set := in.CalicoNodeEnv[env.name]
		if !set {
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(raw))
		if err == nil && env.ok(v) {
			*env.into = v
			continue
		}
		problems = append(problems, fmt.Sprintf("env %s=%q on the calico-node container of DaemonSet %s overrides FelixConfiguration default; "+
			"Windows needs %s: remove %s where it is added to calico-node, or set it to a value Windows accepts",
			env.name, raw, ds, env.want, env.name))
	}
	if len(problems) > 0 {
		return result(CheckVXLANSettings, v1alpha1.CheckFail, "%s", strings.Join(problems, "; "))
	}
	return result(CheckVXLANSettings, v1alpha1.CheckPass, "VXLAN port %d, VNI %d", port, vni)
}

func acknowledged(spec v1alpha1.PreflightSpec, a v1alpha1.Acknowledgement) bool {
	return slices.Contains(spec.Acknowledge, a)
}

func bgpPeers(in Inputs, spec v1alpha1.PreflightSpec) v1alpha1.PreflightCheck {
	if len(in.BGPPeers) == 0 {
		return result(CheckBGPPeers, v1alpha1.CheckPass, "no BGPPeer sessions")
	}
	names := in.BGPPeers
	if len(names) > 10 {
		names = append(slices.Clone(names[:10]), fmt.Sprintf("and %d more", len(in.BGPPeers)-10))
	}
	if acknowledged(spec, v1alpha1.AcknowledgeBGPPeers) {
		return result(CheckBGPPeers, v1alpha1.CheckWarn, "turning BGP off ends the sessions of BGPPeers %s (acknowledged)",
			strings.Join(names, ", "))
	}
	return result(CheckBGPPeers, v1alpha1.CheckFail,
		"turning BGP off ends the sessions of BGPPeers %s; move what depends on them, then add BGPPeers to spec.preflight.acknowledge",
		strings.Join(names, ", "))
}

func serviceAdverts(in Inputs, spec v1alpha1.PreflightSpec) v1alpha1.PreflightCheck {
	var adverts []string
	if c := in.BGPConfig; c != nil {
		if len(c.Spec.ServiceClusterIPs) > 0 {
			adverts = append(adverts, "serviceClusterIPs")
		}
		if len(c.Spec.ServiceExternalIPs) > 0 {
			adverts = append(adverts, "serviceExternalIPs")
		}
		if len(c.Spec.ServiceLoadBalancerIPs) > 0 {
			adverts = append(adverts, "serviceLoadBalancerIPs")
		}
	}
	if len(adverts) == 0 {
		return result(CheckServiceAdverts, v1alpha1.CheckPass, "no service addresses advertised over BGP")
	}
	if acknowledged(spec, v1alpha1.AcknowledgeServiceAdvertisement) {
		return result(CheckServiceAdverts, v1alpha1.CheckWarn, "BGPConfiguration default advertises %s; that stops (acknowledged)",
			strings.Join(adverts, ", "))
	}
	return result(CheckServiceAdverts, v1alpha1.CheckFail,
		"BGPConfiguration default advertises %s over BGP, which stops when BGP is off; provide another path to those addresses, "+
			"then add ServiceAdvertisement to spec.preflight.acknowledge", strings.Join(adverts, ", "))
}

func blockSize(in Inputs) v1alpha1.PreflightCheck {
	var parts []string
	for _, p := range calico.IPPools(in.Installation) {
		prefix, err := netip.ParsePrefix(p.CIDR)
		if err != nil || !prefix.Addr().Is4() {
			continue
		}
		size := int32(defaultBlockSize)
		if p.BlockSize != nil {
			size = *p.BlockSize
		}
		pods := (1 << (32 - size)) - reservedPerWindow
		parts = append(parts, fmt.Sprintf("%s: blockSize %d gives %d pods per Windows node (set maxPods to at most %d)",
			p.Name, size, max(pods, 0), max(pods, 0)))
	}
	if len(parts) == 0 {
		return result(CheckBlockSize, v1alpha1.CheckWarn, "no IPv4 pool: Windows pods will get no address")
	}
	return result(CheckBlockSize, v1alpha1.CheckInfo, "%s", strings.Join(parts, "; "))
}

// kubeDNS fails when the DNS Service the Tigera operator's Windows
// controller looks up is absent: calico-windows would stay Degraded and no
// calico-node-windows would ever be rendered, after BGP is already off.
func kubeDNS(in Inputs) v1alpha1.PreflightCheck {
	if provider(in).IsOpenShift() {
		return result(CheckKubeDNS, v1alpha1.CheckInfo, "not checked on OpenShift (see %s)", CheckProvider)
	}
	if in.DNSServiceFound {
		return result(CheckKubeDNS, v1alpha1.CheckPass, "Service %s exists", in.DNSService)
	}
	return result(CheckKubeDNS, v1alpha1.CheckFail,
		"Service %s is missing: for kubernetesProvider %q the Tigera operator's Windows controller reads the cluster DNS "+
			"addresses from it, and without it TigeraStatus calico-windows stays Degraded (\"%s service not found\") and "+
			"calico-node-windows is never rendered. Create it (the cluster DNS Service, e.g. CoreDNS's) under that name, or "+
			"correct the Installation's spec.kubernetesProvider if it names the wrong platform",
		in.DNSService, providerName(in), in.DNSService.Name)
}

func provider(in Inputs) operatorv1.Provider {
	if in.Installation == nil {
		return operatorv1.ProviderNone
	}
	return in.Installation.Spec.KubernetesProvider
}

func providerName(in Inputs) string {
	if p := provider(in); p != operatorv1.ProviderNone {
		return string(p)
	}
	return "none (kubeadm and other upstream distributions)"
}

// kubernetesProvider shows the platform the Tigera operator renders for, and
// refuses the one winready does not migrate.
func kubernetesProvider(in Inputs) v1alpha1.PreflightCheck {
	if provider(in).IsOpenShift() {
		return result(CheckProvider, v1alpha1.CheckFail,
			"kubernetesProvider OpenShift is not supported: on OpenShift the cluster network and Windows nodes are managed "+
				"by the cluster's own operators (the Windows Machine Config Operator), not by this migration; change the "+
				"network there instead")
	}
	return result(CheckProvider, v1alpha1.CheckInfo, "kubernetesProvider %s; the cluster DNS Service for it is %s",
		providerName(in), calico.DNSService(provider(in)))
}

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

func borrowed(in Inputs) v1alpha1.PreflightCheck {
	if in.BlocksUnreadable {
		return result(CheckBorrowed, v1alpha1.CheckInfo, "IPAM blocks are served neither by projectcalico.org/v3 nor by crd.projectcalico.org/v1: borrowed addresses not checked")
	}
	if len(in.Borrowed) == 0 {
		return result(CheckBorrowed, v1alpha1.CheckPass, "no node uses addresses from another node's block")
	}
	nodes := make([]string, 0, len(in.Borrowed))
	total := 0
	for n, count := range in.Borrowed {
		nodes = append(nodes, fmt.Sprintf("%s (%d)", n, count))
		total += count
	}
	slices.Sort(nodes)
	return result(CheckBorrowed, v1alpha1.CheckWarn,
		"%d addresses are borrowed from other nodes' blocks, on %s: the pool ran out of free blocks at some point, and under "+
			"strictAffinity no node borrows again; %s says whether every node can still get addresses. Do not restart those pods "+
			"to release the addresses: they may get none back", total, boundedList(nodes), CheckAffinityCapacity)
}

// The Calico minors the core scenarios pass on against the real Tigera
// operator (make e2e E2E_OPERATORS=...; docs/install.md, "Calico versions"):
// v3.28.1 (operator v1.35.0) to v3.32.1 (operator v1.42.3).
var (
	OldestTestedCalico = version.MajorMinor(3, 28)
	NewestTestedCalico = version.MajorMinor(3, 32)
)

// calicoVersion fails on a Calico older than the oldest tested one unless a
// person acknowledges it (the operators before v1.34 have no IP pool
// controller, and before v1.31 no Windows support, so the migration cannot
// work there), warns on one newer than the newest tested, and passes in
// between. Calico Enterprise numbers its releases apart: it is reported.
func calicoVersion(in Inputs, spec v1alpha1.PreflightSpec) v1alpha1.PreflightCheck {
	if in.Installation == nil || in.Installation.Status.CalicoVersion == "" {
		return result(CheckCalicoVersion, v1alpha1.CheckInfo, "the Installation does not report a Calico version yet")
	}
	st := in.Installation.Status
	if st.Variant.IsEnterprise() {
		return result(CheckCalicoVersion, v1alpha1.CheckInfo, "Calico %s (%s): not in winready's table of tested versions", st.CalicoVersion, st.Variant)
	}
	tested := fmt.Sprintf("v%d.%d to v%d.%d", OldestTestedCalico.Major(), OldestTestedCalico.Minor(),
		NewestTestedCalico.Major(), NewestTestedCalico.Minor())
	v, err := version.ParseGeneric(st.CalicoVersion)
	if err != nil {
		return result(CheckCalicoVersion, v1alpha1.CheckWarn, "Calico %q (%s) is not a version winready can read: it is tested with Calico %s",
			st.CalicoVersion, st.Variant, tested)
	}
	minor := version.MajorMinor(v.Major(), v.Minor())
	switch {
	case minor.LessThan(OldestTestedCalico):
		why := fmt.Sprintf("Calico %s is older than winready's oldest tested version (it is tested with Calico %s): "+
			"before v3.28 the Tigera operator has no IP pool controller, so an encapsulation change in the Installation "+
			"never reaches the IPPools, and before v3.27 it has no Windows support (docs/install.md, Calico versions)", st.CalicoVersion, tested)
		if acknowledged(spec, v1alpha1.AcknowledgeUntestedCalicoVersion) {
			return result(CheckCalicoVersion, v1alpha1.CheckWarn, "%s (acknowledged)", why)
		}
		return result(CheckCalicoVersion, v1alpha1.CheckFail, "%s; upgrade Calico, or add UntestedCalicoVersion to spec.preflight.acknowledge", why)
	case NewestTestedCalico.LessThan(minor):
		return result(CheckCalicoVersion, v1alpha1.CheckWarn,
			"Calico %s is newer than winready's newest tested version (it is tested with Calico %s): what the Tigera operator does with the Installation may have changed",
			st.CalicoVersion, tested)
	}
	return result(CheckCalicoVersion, v1alpha1.CheckPass, "Calico %s (%s): winready is tested with Calico %s", st.CalicoVersion, st.Variant, tested)
}

// CalicoVersionOf is the CalicoVersion check on Installation inst alone:
// kubectl winready check --pre judges the version as the preflight does,
// before winready is installed and without gathering the rest.
func CalicoVersionOf(inst *operatorv1.Installation, spec v1alpha1.PreflightSpec) v1alpha1.PreflightCheck {
	return calicoVersion(Inputs{Installation: inst}, spec)
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

// poolServes says which nodes an Installation pool may give blocks to, from
// its nodeSelector: one that mentions windows is taken for Windows only, any
// other for Linux only, none (or all()) for both. The selector itself is not
// evaluated.
func poolServes(p operatorv1.IPPool) (linux, windows bool) {
	sel := strings.TrimSpace(p.NodeSelector)
	if sel == "" || sel == "all()" {
		return true, true
	}
	w := strings.Contains(sel, calico.OSWindows)
	return !w, w
}

// workloadPool reports whether new workload addresses can come from pool p:
// an enabled IPv4 pool for workloads whose block size fits its CIDR.
func workloadPool(p operatorv1.IPPool) (netip.Prefix, int32, bool) {
	prefix, err := netip.ParsePrefix(p.CIDR)
	if err != nil || !prefix.Addr().Is4() || (p.DisableNewAllocations != nil && *p.DisableNewAllocations) ||
		(len(p.AllowedUses) > 0 && !slices.Contains(p.AllowedUses, operatorv1.IPPoolAllowedUseWorkload)) {
		return netip.Prefix{}, 0, false
	}
	size := int32(defaultBlockSize)
	if p.BlockSize != nil {
		size = *p.BlockSize
	}
	prefix = prefix.Masked()
	if int(size) < prefix.Bits() || size > 32 {
		return netip.Prefix{}, 0, false
	}
	return prefix, size, true
}

// freeBlocks counts the blocks of a pool no node holds yet.
func freeBlocks(prefix netip.Prefix, size int32, blocks []netip.Prefix) (free, total int64) {
	total = int64(1) << (int(size) - prefix.Bits())
	var used int64
	for _, b := range blocks {
		if b.Bits() >= prefix.Bits() && prefix.Contains(b.Addr()) {
			used++
		}
	}
	return max(total-used, 0), total
}

// linuxDemand is what strictAffinity leaves the Linux nodes: the nodes that
// hold no affine block with a free address in a pool that serves Linux
// (each needs a free block of its own for its next pod), the free blocks of
// those pools, and how many of those free blocks Windows nodes could also
// use. Without borrowing, a node whose blocks are full gives its next pod no
// address (libcalico-go: "No more free affine blocks and strict affinity
// enabled").
func linuxDemand(in Inputs) (needing []string, linuxFree, sharedFree int64, parts []string) {
	var linuxPools []netip.Prefix
	for _, p := range calico.IPPools(in.Installation) {
		prefix, size, ok := workloadPool(p)
		linux, windows := poolServes(p)
		if !ok || !linux {
			continue
		}
		linuxPools = append(linuxPools, prefix)
		free, total := freeBlocks(prefix, size, in.BlockCIDRs)
		linuxFree += free
		if windows {
			sharedFree += free
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %d of %d blocks free", p.Name, p.CIDR, free, total))
	}
	room := map[string]bool{}
	for _, b := range in.Blocks {
		if b.Free == 0 {
			continue
		}
		for _, pool := range linuxPools {
			if pool.Contains(b.CIDR.Addr()) {
				room[b.Node] = true
			}
		}
	}
	for _, n := range in.Nodes {
		if (n.OS == "" || n.OS == "linux") && !room[n.Name] {
			needing = append(needing, n.Name)
		}
	}
	slices.Sort(needing)
	return needing, linuxFree, sharedFree, parts
}

// affinityCapacity fails when, once strictAffinity stops borrowing, some
// Linux nodes could give new pods no address: more of them need a new block
// than the pools serving them have free.
func affinityCapacity(in Inputs) v1alpha1.PreflightCheck {
	if in.BlocksUnreadable {
		return result(CheckAffinityCapacity, v1alpha1.CheckInfo, "IPAM blocks are not readable: Linux nodes' capacity under strictAffinity not checked")
	}
	needing, free, _, parts := linuxDemand(in)
	detail := strings.Join(parts, "; ")
	if detail == "" {
		detail = "no enabled IPv4 workload pool in the Installation serves Linux nodes"
	}
	if int64(len(needing)) > free {
		return result(CheckAffinityCapacity, v1alpha1.CheckFail,
			"after strictAffinity, %d Linux nodes hold no block with a free address (%s) but only %d blocks are free in the pools "+
				"that serve them (%s): without borrowing, new pods on %d of them would get no address. Add a larger or an "+
				"additional IPv4 pool (encapsulation VXLAN) to the Installation's spec.calicoNetwork.ipPools, inside the cluster's pod network "+
				"(on kubeadm the Tigera operator refuses pools outside kubeadm-config's podSubnet); restarting pods frees no block",
			len(needing), boundedList(needing), free, detail, int64(len(needing))-free)
	}
	return result(CheckAffinityCapacity, v1alpha1.CheckPass,
		"%d Linux nodes need a new block for their next pods under strictAffinity and %d are free (%s)", len(needing), free, detail)
}

// windowsIPAMCapacity compares spec.windowsNodes.expected with the free IPAM
// blocks left once the Linux nodes took theirs: with strictAffinity a Windows
// node never borrows, so each needs a block of its own in a pool that may
// serve it. No block for any Windows node fails too.
func windowsIPAMCapacity(in Inputs) v1alpha1.PreflightCheck {
	var parts, notes []string
	var free int64
	for _, p := range calico.IPPools(in.Installation) {
		poolFree, part, note := poolCapacity(p, in.BlockCIDRs)
		if note != "" {
			notes = append(notes, note)
		}
		if part != "" {
			free += poolFree
			parts = append(parts, part)
		}
	}
	detail := "no enabled IPv4 workload pool in the Installation may serve Windows nodes"
	if len(parts) > 0 {
		detail = strings.Join(parts, "; ")
	}
	if len(notes) > 0 {
		detail += "; " + strings.Join(notes, "; ")
	}
	if in.BlocksUnreadable {
		detail += "; IPAM blocks are not readable, so allocated blocks are not subtracted"
	} else if needing, linuxFree, shared, _ := linuxDemand(in); len(needing) > 0 {
		// Linux nodes draw on the pools they share with Windows nodes once
		// their own are used up.
		taken := min(max(int64(len(needing))-(linuxFree-shared), 0), shared)
		if taken > 0 {
			free -= taken
			detail += fmt.Sprintf("; %d of the shared blocks go to Linux nodes that need one (%s)", taken, CheckAffinityCapacity)
		}
	}
	if free <= 0 {
		return result(CheckIPAMCapacity, v1alpha1.CheckFail,
			"no free block is left for any Windows node (%s): with strictAffinity a Windows node needs a free block of its own and "+
				"never borrows. Add a larger or an additional IPv4 pool (encapsulation VXLAN) that may serve Windows nodes to the "+
				"Installation's spec.calicoNetwork.ipPools, inside the cluster's pod network (on kubeadm the Tigera operator refuses pools "+
				"outside kubeadm-config's podSubnet)", detail)
	}
	if in.ExpectedWindowsNodes == nil {
		return result(CheckIPAMCapacity, v1alpha1.CheckInfo,
			"%d blocks free in total, one per Windows node under strictAffinity (%s); set spec.windowsNodes.expected to check", free, detail)
	}
	expected := int64(*in.ExpectedWindowsNodes)
	if expected > free {
		return result(CheckIPAMCapacity, v1alpha1.CheckFail,
			"spec.windowsNodes.expected is %d but only %d blocks are free in total (%s). With strictAffinity each Windows node needs "+
				"a free block of its own in an enabled IPv4 pool that selects it: add such a pool (encapsulation VXLAN) to the "+
				"Installation's spec.calicoNetwork.ipPools, or lower spec.windowsNodes.expected", expected, free, detail)
	}
	return result(CheckIPAMCapacity, v1alpha1.CheckInfo, "%d blocks free in total for %d expected Windows nodes (%s)", free, expected, detail)
}

// poolCapacity counts the free blocks of an Installation pool that may serve
// Windows nodes. part describes a counted pool ("" when it is not counted);
// note says why a pool is not counted, or how it was.
func poolCapacity(p operatorv1.IPPool, blocks []netip.Prefix) (free int64, part, note string) {
	prefix, err := netip.ParsePrefix(p.CIDR)
	if err != nil || !prefix.Addr().Is4() || (p.DisableNewAllocations != nil && *p.DisableNewAllocations) ||
		(len(p.AllowedUses) > 0 && !slices.Contains(p.AllowedUses, operatorv1.IPPoolAllowedUseWorkload)) {
		return 0, "", ""
	}
	if sel := strings.TrimSpace(p.NodeSelector); sel != "" && sel != "all()" {
		if !strings.Contains(sel, calico.OSWindows) {
			return 0, "", fmt.Sprintf("%s not counted: its nodeSelector %q does not mention windows", p.Name, sel)
		}
		note = fmt.Sprintf("%s counted because its nodeSelector %q mentions windows (the selector itself is not evaluated)", p.Name, sel)
	}
	size := int32(defaultBlockSize)
	if p.BlockSize != nil {
		size = *p.BlockSize
	}
	prefix = prefix.Masked()
	if int(size) < prefix.Bits() || size > 32 {
		return 0, "", fmt.Sprintf("%s not counted: blockSize %d does not fit %s", p.Name, size, p.CIDR)
	}
	free, total := freeBlocks(prefix, size, blocks)
	return free, fmt.Sprintf("%s (%s): %d of %d blocks free, %d pods per Windows node",
		p.Name, p.CIDR, free, total, max((1<<(32-size))-reservedPerWindow, 0)), note
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

// boundedList joins at most ten items and says how many more there are.
func boundedList(items []string) string {
	const most = 10
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:most], ", ") + fmt.Sprintf(" and %d more", len(items)-most)
}
