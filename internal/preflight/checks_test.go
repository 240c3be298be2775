package preflight

import (
	"net/netip"
	"strings"
	"testing"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
)

func installationWith(pools ...operatorv1.IPPool) *operatorv1.Installation {
	return &operatorv1.Installation{Spec: operatorv1.InstallationSpec{
		CalicoNetwork: &operatorv1.CalicoNetworkSpec{IPPools: pools}}}
}

var crossSubnet = operatorv1.IPPool{Name: "default-ipv4-ippool", CIDR: "172.20.0.0/16",
	Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet, BlockSize: ptr.To[int32](26)}

func healthy() Inputs {
	return Inputs{Installation: installationWith(crossSubnet), CalicoAPIServed: true, KubeDNS: true}
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name    string
		in      func() Inputs
		spec    v1alpha1.PreflightSpec
		check   string
		result  v1alpha1.CheckResult
		message string
	}{
		{"the usual cluster passes", healthy, v1alpha1.PreflightSpec{}, CheckIPIPPools, v1alpha1.CheckPass, "no pool"},
		{"no Calico API fails", func() Inputs { in := healthy(); in.CalicoAPIServed = false; return in },
			v1alpha1.PreflightSpec{}, CheckCalicoAPI, v1alpha1.CheckFail, "Install the Calico API server"},
		{"an IPIP pool fails", func() Inputs {
			in := healthy()
			in.Installation = installationWith(operatorv1.IPPool{Name: "p", CIDR: "10.1.0.0/16", Encapsulation: operatorv1.EncapsulationIPIPCrossSubnet})
			return in
		}, v1alpha1.PreflightSpec{}, CheckIPIPPools, v1alpha1.CheckFail, "p (10.1.0.0/16, IPIPCrossSubnet)"},
		{"an IPv6 pool warns", func() Inputs {
			in := healthy()
			in.Installation = installationWith(crossSubnet, operatorv1.IPPool{Name: "v6", CIDR: "fd00::/48"})
			return in
		}, v1alpha1.PreflightSpec{}, CheckIPv6Pools, v1alpha1.CheckWarn, "fd00::/48"},
		{"another VXLAN port fails", func() Inputs {
			in := healthy()
			in.Felix = &calicov3.FelixConfiguration{Spec: calicov3.FelixConfigurationSpec{VXLANPort: ptr.To(8472)}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckVXLANSettings, v1alpha1.CheckFail, "vxlanPort 8472"},
		{"a low VNI fails", func() Inputs {
			in := healthy()
			in.Felix = &calicov3.FelixConfiguration{Spec: calicov3.FelixConfigurationSpec{VXLANVNI: ptr.To(100)}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckVXLANSettings, v1alpha1.CheckFail, "vxlanVNI 100"},
		{"an unencapsulated IPv6 pool fails, naming it and the choice", func() Inputs {
			in := healthy()
			in.Installation = installationWith(crossSubnet, operatorv1.IPPool{Name: "v6", CIDR: "fd00::/48"})
			return in
		}, v1alpha1.PreflightSpec{}, CheckUnencapsulated, v1alpha1.CheckFail, "v6 (fd00::/48): Windows is IPv4 only"},
		{"an unencapsulated IPv4 pool fails", func() Inputs {
			in := healthy()
			in.Installation = installationWith(crossSubnet, operatorv1.IPPool{Name: "flat", CIDR: "10.9.0.0/16", Encapsulation: operatorv1.EncapsulationNone})
			return in
		}, v1alpha1.PreflightSpec{}, CheckUnencapsulated, v1alpha1.CheckFail, "flat (10.9.0.0/16): set its encapsulation to VXLAN"},
		{"a VXLAN IPv6 pool passes the encapsulation check", func() Inputs {
			in := healthy()
			in.Installation = installationWith(crossSubnet, operatorv1.IPPool{Name: "v6", CIDR: "fd00::/48", Encapsulation: operatorv1.EncapsulationVXLAN})
			return in
		}, v1alpha1.PreflightSpec{}, CheckUnencapsulated, v1alpha1.CheckPass, "every Installation pool is encapsulated"},
		{"Felix cluster routing lifts the BGP need", func() Inputs {
			in := healthy()
			in.Installation = installationWith(crossSubnet, operatorv1.IPPool{Name: "v6", CIDR: "fd00::/48"})
			in.Installation.Spec.CalicoNetwork.ClusterRoutingMode = ptr.To(operatorv1.ClusterRoutingModeFelix)
			return in
		}, v1alpha1.PreflightSpec{}, CheckUnencapsulated, v1alpha1.CheckPass, "Felix programs cluster routes"},
		{"a cross-subnet pool outside the Installation fails with how to move it", func() Inputs {
			in := healthy()
			in.Pools = []calicov3.IPPool{{ObjectMeta: metav1.ObjectMeta{Name: "hand-made"},
				Spec: calicov3.IPPoolSpec{CIDR: "172.30.0.0/16", VXLANMode: calicov3.VXLANModeCrossSubnet}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckForeignPools, v1alpha1.CheckFail, "hand-made (172.30.0.0/16, vxlanMode CrossSubnet, ipipMode Never). Move each under the Installation"},
		{"pools the operator owns, VXLAN pools and disabled pools outside it pass", func() Inputs {
			in := healthy()
			in.Pools = []calicov3.IPPool{
				{ObjectMeta: metav1.ObjectMeta{Name: "default-ipv4-ippool"}, Spec: calicov3.IPPoolSpec{CIDR: "172.20.0.0/16", VXLANMode: calicov3.VXLANModeCrossSubnet}},
				{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Labels: map[string]string{"app.kubernetes.io/managed-by": "tigera-operator"}},
					Spec: calicov3.IPPoolSpec{CIDR: "172.21.0.0/16", IPIPMode: calicov3.IPIPModeAlways}},
				{ObjectMeta: metav1.ObjectMeta{Name: "vxlan"}, Spec: calicov3.IPPoolSpec{CIDR: "172.22.0.0/16", VXLANMode: calicov3.VXLANModeAlways}},
				{ObjectMeta: metav1.ObjectMeta{Name: "off"}, Spec: calicov3.IPPoolSpec{CIDR: "172.23.0.0/16", Disabled: true}},
				{ObjectMeta: metav1.ObjectMeta{Name: "lb"}, Spec: calicov3.IPPoolSpec{CIDR: "172.24.0.0/16",
					AllowedUses: []calicov3.IPPoolAllowedUse{calicov3.IPPoolAllowedUseLoadBalancer}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "v6"}, Spec: calicov3.IPPoolSpec{CIDR: "fd00::/48"}},
			}
			return in
		}, v1alpha1.PreflightSpec{}, CheckForeignPools, v1alpha1.CheckPass, "every workload pool"},
		{"Felix defaults pass", healthy, v1alpha1.PreflightSpec{}, CheckVXLANSettings, v1alpha1.CheckPass, "port 4789, VNI 4096"},
		{"BGP peers fail", func() Inputs { in := healthy(); in.BGPPeers = []string{"tor-a"}; return in },
			v1alpha1.PreflightSpec{}, CheckBGPPeers, v1alpha1.CheckFail, "tor-a"},
		{"acknowledged BGP peers warn", func() Inputs { in := healthy(); in.BGPPeers = []string{"tor-a"}; return in },
			v1alpha1.PreflightSpec{Acknowledge: []v1alpha1.Acknowledgement{v1alpha1.AcknowledgeBGPPeers}},
			CheckBGPPeers, v1alpha1.CheckWarn, "acknowledged"},
		{"service advertisement fails", func() Inputs {
			in := healthy()
			in.BGPConfig = &calicov3.BGPConfiguration{Spec: calicov3.BGPConfigurationSpec{
				ServiceLoadBalancerIPs: []calicov3.ServiceLoadBalancerIPBlock{{CIDR: "192.0.2.0/24"}}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckServiceAdverts, v1alpha1.CheckFail, "serviceLoadBalancerIPs"},
		{"block size gives pods per Windows node", healthy, v1alpha1.PreflightSpec{}, CheckBlockSize, v1alpha1.CheckInfo,
			"blockSize 26 gives 60 pods per Windows node"},
		{"a policy allowing node addresses warns with the tunnel addresses to add", func() Inputs {
			in := healthy()
			in.Nodes = []NodeAddresses{
				{Name: "linux-0", InternalIP: netip.MustParseAddr("10.0.0.11"), TunnelIP: netip.MustParseAddr("172.20.1.0")},
				{Name: "linux-1", InternalIP: netip.MustParseAddr("10.0.0.12"), TunnelIP: netip.MustParseAddr("172.20.2.0")},
			}
			in.PolicyCIDRs = map[string][]string{"NetworkPolicy monitoring/allow-nodes": {"10.0.0.0/24"}, "NetworkPolicy a/b": {"192.0.2.0/24"}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckNodePolicies, v1alpha1.CheckWarn,
			"NetworkPolicy monitoring/allow-nodes (10.0.0.0/24) allow node addresses; with VXLAN everywhere, host-networked traffic from other nodes comes from their tunnel addresses: add 172.20.1.0/32, 172.20.2.0/32"},
		{"policies on other addresses pass", func() Inputs {
			in := healthy()
			in.Nodes = []NodeAddresses{{Name: "linux-0", InternalIP: netip.MustParseAddr("10.0.0.11")}}
			in.PolicyCIDRs = map[string][]string{"NetworkPolicy a/b": {"192.0.2.0/24"}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckNodePolicies, v1alpha1.CheckPass, "no network policy"},
		{"borrowed addresses warn", func() Inputs { in := healthy(); in.Borrowed = map[string]int{"linux-2": 3}; return in },
			v1alpha1.PreflightSpec{}, CheckBorrowed, v1alpha1.CheckWarn, "3 addresses are borrowed from other nodes' blocks, on linux-2 (3)"},
		{"the Calico version is reported", func() Inputs {
			in := healthy()
			in.Installation.Status.CalicoVersion, in.Installation.Status.Variant = "v3.32.0", operatorv1.Calico
			return in
		}, v1alpha1.PreflightSpec{}, CheckCalicoVersion, v1alpha1.CheckInfo, "Calico v3.32.0 (Calico)"},
		{"missing kube-dns warns", func() Inputs { in := healthy(); in.KubeDNS = false; return in },
			v1alpha1.PreflightSpec{}, CheckKubeDNS, v1alpha1.CheckWarn, "kube-system/kube-dns is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var found *v1alpha1.PreflightCheck
			for _, c := range Evaluate(tc.in(), tc.spec) {
				if c.Name == tc.check {
					found = &c
				}
			}
			if found == nil {
				t.Fatalf("no %s check", tc.check)
			}
			if found.Result != tc.result || !strings.Contains(found.Message, tc.message) {
				t.Fatalf("%s: got %s %q, want %s containing %q", tc.check, found.Result, found.Message, tc.result, tc.message)
			}
		})
	}
}
