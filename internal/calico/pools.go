package calico

import (
	"net/netip"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
)

// VXLANMode is the IPPool vxlanMode the Tigera operator writes for an
// Installation pool encapsulation.
func VXLANMode(enc operatorv1.EncapsulationType) calicov3.VXLANMode {
	switch enc {
	case operatorv1.EncapsulationVXLAN:
		return calicov3.VXLANModeAlways
	case operatorv1.EncapsulationVXLANCrossSubnet:
		return calicov3.VXLANModeCrossSubnet
	}
	return calicov3.VXLANModeNever
}

// IsIPv4 reports whether a pool CIDR is IPv4. Unparsable CIDRs are not.
func IsIPv4(cidr string) bool {
	p, err := netip.ParsePrefix(cidr)
	return err == nil && p.Addr().Is4()
}

// IsIPIP reports whether an encapsulation uses IP-in-IP, which Windows lacks.
func IsIPIP(enc operatorv1.EncapsulationType) bool {
	return enc == operatorv1.EncapsulationIPIP || enc == operatorv1.EncapsulationIPIPCrossSubnet
}
