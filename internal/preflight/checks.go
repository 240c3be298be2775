// Package preflight decides, before the first change, whether this Calico
// cluster can be made Windows-ready, and tells a person what to fix when not.
package preflight

import (
	"github.com/winready/winready/api/v1alpha1"
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
