package calicosim

import (
	"errors"
	"fmt"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
)

// validateInstallation is the part of the operator's validateCustomResource
// (pkg/controller/installation/validation.go) that a Windows migration runs into, with the same messages. The
// core controller and the Windows controller both run it on the defaulted spec; a failure is reported as
// "Invalid Installation provided: <error>" with reason InvalidConfigurationError, and nothing is rendered.
func validateInstallation(spec *operatorv1.InstallationSpec, ep serviceEndpoint) error {
	// "We only support RollingUpdate for the node daemonset strategy": an Installation asking for OnDelete
	// renders nothing. The operator's message names the rollingUpdate settings where it means the type.
	if spec.NodeUpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		return fmt.Errorf(errNodeUpdateStrategy, spec.NodeUpdateStrategy.RollingUpdate)
	}
	if err := validateRouting(spec); err != nil {
		return err
	}
	if cn := spec.CalicoNetwork; cn != nil && cn.LinuxDataplane != nil && *cn.LinuxDataplane == operatorv1.LinuxDataplaneVPP &&
		(cn.BGP == nil || *cn.BGP == operatorv1.BGPDisabled) {
		return errors.New(errVPPNeedsBGP)
	}
	if !windowsEnabled(spec) {
		if spec.WindowsNodes != nil {
			return errors.New(errWindowsNodesDisabled)
		}
		return nil
	}
	// The operator reads the endpoint from a process-wide variable filled from the ConfigMap.
	if ep.host == "" || ep.port == "" {
		return errors.New(errWindowsServicesEndpoint)
	}
	if spec.CNI != nil && spec.CNI.Type == operatorv1.PluginCalico {
		if len(spec.ServiceCIDRs) == 0 {
			return errors.New(errWindowsServiceCIDRs)
		}
		if pool := firstIPv4Pool(spec); pool != nil &&
			pool.Encapsulation != operatorv1.EncapsulationVXLAN && pool.Encapsulation != operatorv1.EncapsulationNone {
			return fmt.Errorf(errWindowsEncapsulation, pool.Encapsulation)
		}
	}
	return nil
}

// firstIPv4Pool is the operator's render.GetIPv4Pool: only the first IPv4 pool counts.
func firstIPv4Pool(spec *operatorv1.InstallationSpec) *operatorv1.IPPool {
	if spec.CalicoNetwork == nil {
		return nil
	}
	for i := range spec.CalicoNetwork.IPPools {
		if isIPv4(spec.CalicoNetwork.IPPools[i].CIDR) {
			return &spec.CalicoNetwork.IPPools[i]
		}
	}
	return nil
}

// validateRouting is the pool loop of validateCustomResource: in BIRD cluster routing mode (the default; Felix
// cluster routing lifts it) IP-in-IP and unencapsulated pools, of either family, need BGP.
func validateRouting(spec *operatorv1.InstallationSpec) error {
	cn := spec.CalicoNetwork
	if cn == nil || spec.CNI == nil || spec.CNI.Type != operatorv1.PluginCalico || spec.CNI.IPAM == nil ||
		spec.CNI.IPAM.Type != operatorv1.IPAMPluginCalico {
		return nil
	}
	felixRouting := cn.ClusterRoutingMode != nil && *cn.ClusterRoutingMode == operatorv1.ClusterRoutingModeFelix
	bgpOff := cn.BGP == nil || *cn.BGP == operatorv1.BGPDisabled
	if felixRouting || !bgpOff {
		return nil
	}
	for _, pool := range cn.IPPools {
		switch pool.Encapsulation {
		case operatorv1.EncapsulationIPIP, operatorv1.EncapsulationIPIPCrossSubnet:
			return errors.New(errIPIPNeedsBGP)
		case operatorv1.EncapsulationNone:
			return errors.New(errUnencapsulatedNeedsBGP)
		}
	}
	return nil
}
