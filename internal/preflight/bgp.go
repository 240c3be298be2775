package preflight

import (
	"fmt"
	"slices"
	"strings"

	"github.com/winready/winready/api/v1alpha1"
)

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
