// Package preflight decides, before the first change, whether this Calico
// cluster can be made Windows-ready, and tells a person what to fix when not.
package preflight

import (
	"fmt"
	"slices"
	"strings"

	"github.com/winready/winready/api/v1alpha1"
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

// check is one rule of the preflight: what it finds in the inputs, given
// what a person acknowledged in spec.preflight.
type check func(Inputs, v1alpha1.PreflightSpec) v1alpha1.PreflightCheck

// inputsOnly is a check that nothing acknowledged changes.
func inputsOnly(f func(Inputs) v1alpha1.PreflightCheck) check {
	return func(in Inputs, _ v1alpha1.PreflightSpec) v1alpha1.PreflightCheck { return f(in) }
}

// evaluated are the checks Evaluate runs, in the order it reports them.
// Those marked served run only where projectcalico.org/v3 is served: without
// it Gather reads none of the IPPools, FelixConfiguration, BGP objects and
// IPAM blocks they judge.
var evaluated = []struct {
	check  check
	served bool
}{
	{check: inputsOnly(calicoAPI)},
	{check: inputsOnly(kubernetesProvider)},
	{check: inputsOnly(overlayInstallation)},
	{check: helmManaged},
	{check: inputsOnly(cniPlugin)},
	{check: inputsOnly(linuxDataplane)},
	{check: inputsOnly(ipipPools)},
	{check: inputsOnly(ipv6Pools)},
	{check: inputsOnly(unencapsulatedPools)},
	{check: inputsOnly(loadBalancerPools)},
	{check: inputsOnly(foreignPools), served: true},
	{check: inputsOnly(vxlanSettings), served: true},
	{check: bgpPeers, served: true},
	{check: serviceAdverts, served: true},
	{check: inputsOnly(apiServerAddress)},
	{check: inputsOnly(imageSetWindows)},
	{check: inputsOnly(blockSize)},
	{check: inputsOnly(kubeDNS)},
	{check: inputsOnly(nodePolicies)},
	{check: inputsOnly(borrowed)},
	{check: calicoVersion},
	// The first Windows node: Linux workers, addresses, kube-proxy, DaemonSets.
	{check: inputsOnly(linuxWorkers)},
	{check: inputsOnly(affinityCapacity), served: true},
	{check: inputsOnly(windowsIPAMCapacity), served: true},
	{check: inputsOnly(kubeProxyWindows)},
	{check: inputsOnly(linuxOnlyDaemonSets)},
}

// Evaluate runs every check. It is pure, so each rule is table-tested.
func Evaluate(in Inputs, spec v1alpha1.PreflightSpec) []v1alpha1.PreflightCheck {
	checks := make([]v1alpha1.PreflightCheck, 0, len(evaluated))
	for _, e := range evaluated {
		if e.served && !in.CalicoAPIServed {
			continue
		}
		checks = append(checks, e.check(in, spec))
	}
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

func acknowledged(spec v1alpha1.PreflightSpec, a v1alpha1.Acknowledgement) bool {
	return slices.Contains(spec.Acknowledge, a)
}

// boundedList joins at most ten items and says how many more there are.
func boundedList(items []string) string {
	const most = 10
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:most], ", ") + fmt.Sprintf(" and %d more", len(items)-most)
}
