package preflight

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// Windows VXLAN limits: HNS only uses UDP 4789 and VNIs from 4096.
const (
	windowsVXLANPort  = 4789
	windowsMinVNI     = 4096
	defaultBlockSize  = 26
	reservedPerWindow = 4 // network, gateway, service address and broadcast
)

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
