package calicosim

import (
	"context"
	"net"
	"strconv"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Default pool and Windows CNI directory values of the operator for a cluster without a detected provider
// (pkg/controller/ippool/defaults.go, pkg/render/windows.go DefaultWindowsCNIDirectories).
const (
	defaultPoolName     = "default-ipv4-ippool"
	defaultPoolCIDR     = "192.168.0.0/16"
	defaultV4BlockSize  = 26
	windowsCNIBinDir    = "/opt/cni/bin"
	windowsCNIConfigDir = "/etc/cni/net.d"
	windowsCNILogDir    = "/var/log/calico/cni"
)

// fillCoreDefaults sets what the core Installation controller defaults (fillDefaults in
// pkg/controller/installation/core_controller.go) for a cluster with no detected provider and Calico CNI. Only
// unset fields are touched. pools are the IPPools in the cluster: IPv4 address autodetection is defaulted only when
// one exists.
func fillCoreDefaults(spec *operatorv1.InstallationSpec, pools []calicov3.IPPool) {
	if spec.Variant == "" {
		spec.Variant = operatorv1.Calico
	}
	fillCNIDefaults(spec)
	if spec.CalicoNetwork == nil {
		spec.CalicoNetwork = &operatorv1.CalicoNetworkSpec{}
	}
	cn := spec.CalicoNetwork
	setIfNil(&cn.LinuxDataplane, operatorv1.LinuxDataplaneIptables)
	setIfNil(&cn.WindowsDataplane, operatorv1.WindowsDataplaneDisabled)
	// Core defaulting writes the Windows CNI directories once Windows is on, and never removes them again.
	if windowsEnabled(spec) {
		if spec.WindowsNodes == nil {
			spec.WindowsNodes = &operatorv1.WindowsNodeSpec{}
		}
		setIfEmpty(&spec.WindowsNodes.CNIBinDir, windowsCNIBinDir)
		setIfEmpty(&spec.WindowsNodes.CNIConfigDir, windowsCNIConfigDir)
		setIfEmpty(&spec.WindowsNodes.CNILogDir, windowsCNILogDir)
	}
	if spec.CNI.Type == operatorv1.PluginCalico {
		setIfNil(&cn.BGP, operatorv1.BGPEnabled)
	} else {
		setIfNil(&cn.BGP, operatorv1.BGPDisabled)
	}
	if cn.NodeAddressAutodetectionV4 == nil && hasIPv4Pool(pools) {
		cn.NodeAddressAutodetectionV4 = &operatorv1.NodeAddressAutodetection{FirstFound: ptrTo(true)}
	}
	if spec.CNI.Type == operatorv1.PluginCalico && *cn.LinuxDataplane == operatorv1.LinuxDataplaneIptables {
		setIfNil(&cn.LinuxPolicySetupTimeoutSeconds, int32(0))
	}
	setIfNil(&spec.CNI.ConfDir, "/etc/cni/net.d")
	setIfNil(&spec.CNI.BinDir, "/opt/cni/bin")
	if spec.CNI.Type == operatorv1.PluginCalico {
		fillCalicoCNIDefaults(spec)
	}
	setIfNil(&spec.ControlPlaneReplicas, int32(2))
	setIfEmpty(&spec.FlexVolumePath, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/")
	setIfEmpty(&spec.KubeletVolumePluginPath, "/var/lib/kubelet")
	if spec.NodeUpdateStrategy.RollingUpdate == nil {
		spec.NodeUpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
	}
	setIfNil(&spec.NodeUpdateStrategy.RollingUpdate.MaxUnavailable, intstr.FromInt32(1))
	if spec.NodeUpdateStrategy.Type == "" {
		spec.NodeUpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
}

// fillCNIDefaults sets the CNI plugin and IPAM: Calico's.
func fillCNIDefaults(spec *operatorv1.InstallationSpec) {
	if spec.CNI == nil {
		spec.CNI = &operatorv1.CNISpec{}
	}
	if spec.CNI.Type == "" {
		spec.CNI.Type = operatorv1.PluginCalico
	}
	if spec.CNI.IPAM == nil {
		spec.CNI.IPAM = &operatorv1.IPAMSpec{}
	}
	if spec.CNI.IPAM.Type == "" {
		spec.CNI.IPAM.Type = operatorv1.IPAMPluginCalico
	}
}

// fillCalicoCNIDefaults sets what fillDefaults sets for the Calico CNI plugin: host ports, multi-interface mode
// and the CNI's logging.
func fillCalicoCNIDefaults(spec *operatorv1.InstallationSpec) {
	cn := spec.CalicoNetwork
	setIfNil(&cn.HostPorts, operatorv1.HostPortsEnabled)
	setIfNil(&cn.MultiInterfaceMode, operatorv1.MultiInterfaceModeNone)
	if spec.Logging == nil {
		spec.Logging = &operatorv1.Logging{}
	}
	if spec.Logging.CNI == nil {
		spec.Logging.CNI = &operatorv1.CNILogging{}
	}
	setIfNil(&spec.Logging.CNI.LogSeverity, operatorv1.LogLevelInfo)
	setIfNil(&spec.Logging.CNI.LogFileMaxCount, uint32(10))
	setIfNil(&spec.Logging.CNI.LogFileMaxAgeDays, uint32(30))
	setIfNil(&spec.Logging.CNI.LogFileMaxSize, resource.MustParse("100Mi"))
}

// fillPoolDefaults sets what the IP pool controller defaults (fillDefaults in pkg/controller/ippool/defaults.go),
// leaving out the kubeadm and OpenShift pod CIDR detection. existing are the IPPools in the cluster.
func fillPoolDefaults(spec *operatorv1.InstallationSpec, existing []calicov3.IPPool) {
	if spec.CalicoNetwork == nil {
		spec.CalicoNetwork = &operatorv1.CalicoNetworkSpec{}
	}
	cn := spec.CalicoNetwork
	if cn.IPPools == nil {
		if len(existing) == 0 {
			if spec.CNI != nil && spec.CNI.IPAM != nil && spec.CNI.IPAM.Type == operatorv1.IPAMPluginCalico {
				cn.IPPools = []operatorv1.IPPool{{Name: defaultPoolName, CIDR: defaultPoolCIDR}}
			}
		} else {
			// Pools exist but the Installation names none: they are managed out of band.
			cn.IPPools = []operatorv1.IPPool{}
		}
	}
	nameByCIDR := map[string]string{}
	for _, p := range existing {
		nameByCIDR[p.Spec.CIDR] = p.Name
	}
	for i := range cn.IPPools {
		p := &cn.IPPools[i]
		if len(p.AllowedUses) == 0 {
			p.AllowedUses = []operatorv1.IPPoolAllowedUse{operatorv1.IPPoolAllowedUseWorkload, operatorv1.IPPoolAllowedUseTunnel}
		}
		if isIPv4(p.CIDR) {
			if p.Encapsulation == "" {
				if spec.CNI != nil && spec.CNI.Type == operatorv1.PluginCalico {
					p.Encapsulation = operatorv1.EncapsulationIPIP
				} else {
					p.Encapsulation = operatorv1.EncapsulationNone
				}
			}
			setIfEmpty(&p.NATOutgoing, operatorv1.NATOutgoingEnabled)
			setIfNil(&p.BlockSize, int32(defaultV4BlockSize))
		} else {
			setIfEmpty(&p.Encapsulation, operatorv1.EncapsulationNone)
			setIfEmpty(&p.NATOutgoing, operatorv1.NATOutgoingDisabled)
			setIfNil(&p.BlockSize, int32(122))
		}
		setIfEmpty(&p.NodeSelector, operatorv1.NodeSelectorDefault)
		setIfNil(&p.DisableNewAllocations, false)
		if p.Name == "" {
			if name, ok := nameByCIDR[p.CIDR]; ok {
				p.Name = name
			} else if len(cn.IPPools) == 1 && isIPv4(p.CIDR) {
				p.Name = defaultPoolName
			} else {
				p.Name = cidrName(p.CIDR)
			}
		}
		setIfEmpty(&p.AssignmentMode, operatorv1.AssignmentModeAutomatic)
	}
}

// writeDefaults writes into the Installation spec whatever fill adds, with an unlocked JSON merge patch as the
// operator does, and only when fill added something. inst is updated from the API server's answer.
func (s *Simulator) writeDefaults(ctx context.Context, inst *operatorv1.Installation, fill func(*operatorv1.InstallationSpec)) error {
	modified := inst.DeepCopy()
	fill(&modified.Spec)
	patch := client.MergeFrom(inst)
	data, err := patch.Data(modified)
	if err != nil {
		return err
	}
	if string(data) == "{}" {
		// The operator sends its defaults patch on every reconcile (core_controller.go); an empty one changes
		// nothing and wakes no watch. The simulator leaves it out: it was about one request in twenty of the
		// controllers suite, each a patch of the Installation through its schema, and no test can tell.
		return nil
	}
	if err := s.patch(ctx, modified, client.RawPatch(types.MergePatchType, data)); err != nil {
		return err
	}
	*inst = *modified
	return nil
}

func windowsEnabled(spec *operatorv1.InstallationSpec) bool {
	return spec.CalicoNetwork != nil && spec.CalicoNetwork.WindowsDataplane != nil &&
		*spec.CalicoNetwork.WindowsDataplane != operatorv1.WindowsDataplaneDisabled
}

func bgpEnabled(spec *operatorv1.InstallationSpec) bool {
	return spec.CalicoNetwork != nil && spec.CalicoNetwork.BGP != nil && *spec.CalicoNetwork.BGP == operatorv1.BGPEnabled
}

func hasIPv4Pool(pools []calicov3.IPPool) bool {
	for _, p := range pools {
		if isIPv4(p.Spec.CIDR) {
			return true
		}
	}
	return false
}

func isIPv4(cidr string) bool {
	ip, _, err := net.ParseCIDR(cidr)
	return err == nil && ip.To4() != nil
}

// cidrName is the operator's cidrToName for IPv4: 10.1.0.0/16 -> 10.1.0.0-16.
func cidrName(cidr string) string {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return cidr
	}
	ones, _ := n.Mask.Size()
	return n.IP.String() + "-" + strconv.Itoa(ones)
}

func ptrTo[T any](v T) *T { return &v }

func setIfNil[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

func setIfEmpty[T ~string](p *T, v T) {
	if *p == "" {
		*p = v
	}
}
