package calico

import (
	"testing"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The rules are the Tigera operator v1.43.0's (pkg/controller/utils/merge.go).
func TestMergeOverlay(t *testing.T) {
	pool := operatorv1.IPPool{Name: "default-ipv4-ippool", CIDR: "172.20.0.0/16", Encapsulation: operatorv1.EncapsulationVXLAN}
	crossSubnet := operatorv1.IPPool{Name: "overlay-pool", CIDR: "172.21.0.0/16", Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet}
	base := operatorv1.InstallationSpec{
		CNI: &operatorv1.CNISpec{Type: operatorv1.PluginCalico},
		CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPDisabled), IPPools: []operatorv1.IPPool{pool},
			WindowsDataplane: ptr.To(operatorv1.WindowsDataplaneHNS), MTU: ptr.To[int32](1450)},
		ServiceCIDRs: []string{"10.96.0.0/12"},
	}
	tests := []struct {
		name    string
		overlay operatorv1.InstallationSpec
		want    func(*operatorv1.InstallationSpec)
	}{
		{"an empty overlay changes nothing", operatorv1.InstallationSpec{}, func(*operatorv1.InstallationSpec) {}},
		{"the overlay's bgp wins and the rest of calicoNetwork stays", operatorv1.InstallationSpec{
			CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)}},
			func(s *operatorv1.InstallationSpec) { s.CalicoNetwork.BGP = ptr.To(operatorv1.BGPEnabled) }},
		{"the overlay's pools replace the whole list", operatorv1.InstallationSpec{
			CalicoNetwork: &operatorv1.CalicoNetworkSpec{IPPools: []operatorv1.IPPool{crossSubnet}}},
			func(s *operatorv1.InstallationSpec) { s.CalicoNetwork.IPPools = []operatorv1.IPPool{crossSubnet} }},
		{"an empty but present pool list counts as set", operatorv1.InstallationSpec{
			CalicoNetwork: &operatorv1.CalicoNetworkSpec{IPPools: []operatorv1.IPPool{}}},
			func(s *operatorv1.InstallationSpec) { s.CalicoNetwork.IPPools = []operatorv1.IPPool{} }},
		{"serviceCIDRs, provider and the node update strategy win", operatorv1.InstallationSpec{
			ServiceCIDRs: []string{"10.0.0.0/24"}, KubernetesProvider: operatorv1.ProviderRKE2,
			NodeUpdateStrategy: appsv1.DaemonSetUpdateStrategy{RollingUpdate: &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: ptr.To(intstr.FromInt32(3))}}},
			func(s *operatorv1.InstallationSpec) {
				s.ServiceCIDRs, s.KubernetesProvider = []string{"10.0.0.0/24"}, operatorv1.ProviderRKE2
				s.NodeUpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(3))}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := base.DeepCopy()
			tc.want(want)
			got := MergeOverlay(base, tc.overlay)
			if !equality.Semantic.DeepEqual(&got, want) {
				t.Fatalf("got %+v\nwant %+v", got.CalicoNetwork, want.CalicoNetwork)
			}
		})
	}
	t.Run("a default without calicoNetwork takes the overlay's whole", func(t *testing.T) {
		got := MergeOverlay(operatorv1.InstallationSpec{}, operatorv1.InstallationSpec{
			CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)}})
		if got.CalicoNetwork == nil || *got.CalicoNetwork.BGP != operatorv1.BGPEnabled {
			t.Fatalf("got %+v", got.CalicoNetwork)
		}
	})
	t.Run("the base is not modified", func(t *testing.T) {
		MergeOverlay(base, operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)}})
		if *base.CalicoNetwork.BGP != operatorv1.BGPDisabled {
			t.Fatal("the base spec changed")
		}
	})
}
