package preflight

import (
	"net/netip"
	"slices"
	"strings"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/detect"
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

// APIServerInputs say where the API server address winready writes for
// calico-node would come from, in the order the targets are decided.
type APIServerInputs struct {
	// Spec is spec.apiServer as host:port, "" when unset.
	Spec string
	// Kept is the address the services-endpoint ConfigMap already holds,
	// which winready keeps; "" when none.
	Kept string
	// Detected is what detection finds when neither is set; nil when it
	// finds nothing (the migration then stalls with DetectionFailed).
	Detected *detect.Endpoint
}
