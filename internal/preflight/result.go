package preflight

import (
	"fmt"
	"slices"
	"strings"

	"github.com/winready/winready/api/v1alpha1"
)

// What a check reports: its name, its result and the message a person reads
// (bounded as the CRD bounds it), and which of the checks failed or warned.

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

// Failed returns the checks that failed.
func Failed(checks []v1alpha1.PreflightCheck) []v1alpha1.PreflightCheck {
	return withResult(checks, v1alpha1.CheckFail)
}

// Warnings returns the checks that warned.
func Warnings(checks []v1alpha1.PreflightCheck) []v1alpha1.PreflightCheck {
	return withResult(checks, v1alpha1.CheckWarn)
}

// withResult returns the checks whose result is r, in their order.
func withResult(checks []v1alpha1.PreflightCheck, r v1alpha1.CheckResult) []v1alpha1.PreflightCheck {
	var with []v1alpha1.PreflightCheck
	for _, c := range checks {
		if c.Result == r {
			with = append(with, c)
		}
	}
	return with
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
