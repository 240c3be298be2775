package calico

import (
	"net/netip"
	"slices"

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

// PoolVXLANMode is an IPPool's vxlanMode, with the empty mode that native v3
// CRDs leave on unencapsulated pools read as Never.
func PoolVXLANMode(p *calicov3.IPPool) calicov3.VXLANMode {
	if p.Spec.VXLANMode == "" {
		return calicov3.VXLANModeNever
	}
	return p.Spec.VXLANMode
}

// ServesWindowsWorkloads reports whether a pool hands out IPv4 addresses to
// workloads: enabled, IPv4, and allowed for workloads (no allowedUses means
// workloads and tunnels).
func ServesWindowsWorkloads(p *calicov3.IPPool) bool {
	if p.Spec.Disabled || !IsIPv4(p.Spec.CIDR) {
		return false
	}
	return len(p.Spec.AllowedUses) == 0 || slices.Contains(p.Spec.AllowedUses, calicov3.IPPoolAllowedUseWorkload)
}

// OwnedByOperator reports whether the Tigera operator manages the pool: it
// carries the operator's label, or the Installation describes it (same name
// and CIDR), which the operator adopts.
func OwnedByOperator(p *calicov3.IPPool, inst *operatorv1.Installation) bool {
	if p.Labels[ManagedByLabel] == ManagedByOperator {
		return true
	}
	for _, ip := range IPPools(inst) {
		if ip.Name == p.Name && ip.CIDR == p.Spec.CIDR {
			return true
		}
	}
	return false
}
