package phase

import (
	"fmt"
	"strings"
	"testing"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// plan renders a step's changes as one line each.
func plan(step Step, in Input) []string {
	var lines []string
	for _, c := range Plan(step.Name(), step.Diff(in)) {
		lines = append(lines, fmt.Sprintf("%s %s: %s -> %s", c.Object, c.Field, c.Before, c.After))
	}
	return lines
}

func installation(mutate func(*operatorv1.Installation)) *operatorv1.Installation {
	bgp := operatorv1.BGPEnabled
	inst := &operatorv1.Installation{Spec: operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{
		BGP: &bgp,
		IPPools: []operatorv1.IPPool{
			{Name: "v4-a", CIDR: "192.168.0.0/16", Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet},
			{Name: "v4-b", CIDR: "10.244.0.0/16", Encapsulation: operatorv1.EncapsulationVXLAN},
			{Name: "v4-c", CIDR: "10.250.0.0/16", Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet},
			{Name: "v6", CIDR: "fd00:10::/48", Encapsulation: operatorv1.EncapsulationNone},
		},
	}}}
	if mutate != nil {
		mutate(inst)
	}
	return inst
}

func migrate(c *calico.Cluster) Input {
	return Input{Cluster: c, Direction: v1alpha1.DirectionMigrate,
		Targets: Targets{ServiceCIDRs: []string{"10.96.0.0/12"}, Host: "10.0.0.10", Port: "6443"}}
}

func rollback(c *calico.Cluster, o *v1alpha1.Originals) Input {
	return Input{Cluster: c, Originals: o, Direction: v1alpha1.DirectionRollback}
}

// recorded is what each step records from the cluster c.
func recorded(c *calico.Cluster) *v1alpha1.Originals {
	o := &v1alpha1.Originals{}
	for _, s := range Steps() {
		s.Record(c, o)
	}
	return o
}

func expectPlan(t *testing.T, step Step, in Input, want ...string) {
	t.Helper()
	got := plan(step, in)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s %s plan:\n got %q\nwant %q", step.Name(), in.Direction, got, want)
	}
}

func TestEncapsulationDiff(t *testing.T) {
	c := &calico.Cluster{Installation: installation(nil)}
	o := recorded(c)
	expectPlan(t, Encapsulation{}, migrate(c),
		"Installation default spec.calicoNetwork.ipPools[name=v4-a].encapsulation: VXLANCrossSubnet -> VXLAN",
		"Installation default spec.calicoNetwork.ipPools[name=v4-c].encapsulation: VXLANCrossSubnet -> VXLAN")
	changes := Encapsulation{}.Diff(migrate(c))
	if changes[1].Pointer != "/spec/calicoNetwork/ipPools/2/encapsulation" || changes[1].Pool.CIDR != "10.250.0.0/16" {
		t.Errorf("the change is not guarded by its pool's index and CIDR: %+v", changes[1])
	}

	migrated := &calico.Cluster{Installation: installation(func(i *operatorv1.Installation) {
		for k := range i.Spec.CalicoNetwork.IPPools[:3] {
			i.Spec.CalicoNetwork.IPPools[k].Encapsulation = operatorv1.EncapsulationVXLAN
		}
	})}
	expectPlan(t, Encapsulation{}, migrate(migrated))
	expectPlan(t, Encapsulation{}, rollback(migrated, o),
		"Installation default spec.calicoNetwork.ipPools[name=v4-a].encapsulation: VXLAN -> VXLANCrossSubnet",
		"Installation default spec.calicoNetwork.ipPools[name=v4-c].encapsulation: VXLAN -> VXLANCrossSubnet")

	// A pool replaced under the same name, and a pool added after the
	// record, are not restored.
	replaced := &calico.Cluster{Installation: installation(func(i *operatorv1.Installation) {
		i.Spec.CalicoNetwork.IPPools[2].Encapsulation = operatorv1.EncapsulationVXLAN
		i.Spec.CalicoNetwork.IPPools[0].CIDR = "172.16.0.0/16"
		i.Spec.CalicoNetwork.IPPools[0].Encapsulation = operatorv1.EncapsulationVXLAN
		i.Spec.CalicoNetwork.IPPools = append(i.Spec.CalicoNetwork.IPPools,
			operatorv1.IPPool{Name: "new", CIDR: "10.9.0.0/16", Encapsulation: operatorv1.EncapsulationVXLAN})
	})}
	expectPlan(t, Encapsulation{}, rollback(replaced, o),
		"Installation default spec.calicoNetwork.ipPools[name=v4-c].encapsulation: VXLAN -> VXLANCrossSubnet")
}

func TestBGPDiff(t *testing.T) {
	c := &calico.Cluster{Installation: installation(nil)}
	o := recorded(c)
	expectPlan(t, BGP{}, migrate(c), "Installation default spec.calicoNetwork.bgp: Enabled -> Disabled")
	absent := &calico.Cluster{Installation: installation(func(i *operatorv1.Installation) { i.Spec.CalicoNetwork.BGP = nil })}
	expectPlan(t, BGP{}, migrate(absent), "Installation default spec.calicoNetwork.bgp: <absent> -> Disabled")
	ao := recorded(absent)
	disabled := &calico.Cluster{Installation: installation(func(i *operatorv1.Installation) {
		off := operatorv1.BGPDisabled
		i.Spec.CalicoNetwork.BGP = &off
	})}
	expectPlan(t, BGP{}, migrate(disabled))
	expectPlan(t, BGP{}, rollback(disabled, o), "Installation default spec.calicoNetwork.bgp: Disabled -> Enabled")
	expectPlan(t, BGP{}, rollback(disabled, ao), "Installation default spec.calicoNetwork.bgp: Disabled -> <absent>")
}

func TestStrictAffinityDiff(t *testing.T) {
	off := &calicov3.IPAMConfiguration{Spec: calicov3.IPAMConfigurationSpec{StrictAffinity: false}}
	on := &calicov3.IPAMConfiguration{Spec: calicov3.IPAMConfigurationSpec{StrictAffinity: true}}
	inst := installation(nil)
	none := &calico.Cluster{Installation: inst}
	expectPlan(t, StrictAffinity{}, migrate(none), "IPAMConfiguration default spec.strictAffinity: <absent> -> true")
	expectPlan(t, StrictAffinity{}, migrate(&calico.Cluster{Installation: inst, IPAMConfig: off}),
		"IPAMConfiguration default spec.strictAffinity: false -> true")
	expectPlan(t, StrictAffinity{}, migrate(&calico.Cluster{Installation: inst, IPAMConfig: on}))
	expectPlan(t, StrictAffinity{}, rollback(&calico.Cluster{Installation: inst, IPAMConfig: on}, recorded(none)),
		"IPAMConfiguration default (object): present -> <absent> (deleted)")
	expectPlan(t, StrictAffinity{}, rollback(&calico.Cluster{Installation: inst, IPAMConfig: on},
		recorded(&calico.Cluster{Installation: inst, IPAMConfig: off})),
		"IPAMConfiguration default spec.strictAffinity: true -> false")
}

func TestServiceCIDRsDiff(t *testing.T) {
	c := &calico.Cluster{Installation: installation(nil)}
	o := recorded(c)
	expectPlan(t, ServiceCIDRs{}, migrate(c), "Installation default spec.serviceCIDRs: <absent> -> [10.96.0.0/12]")
	set := &calico.Cluster{Installation: installation(func(i *operatorv1.Installation) { i.Spec.ServiceCIDRs = []string{"10.96.0.0/12"} })}
	expectPlan(t, ServiceCIDRs{}, migrate(set))
	expectPlan(t, ServiceCIDRs{}, rollback(set, o), "Installation default spec.serviceCIDRs: [10.96.0.0/12] -> <absent>")
	other := migrate(set)
	other.Targets.ServiceCIDRs = []string{"10.96.0.0/12", "fd00:96::/108"}
	expectPlan(t, ServiceCIDRs{}, other, "Installation default spec.serviceCIDRs: [10.96.0.0/12] -> [10.96.0.0/12, fd00:96::/108]")
}

func TestWindowsDataplaneDiff(t *testing.T) {
	c := &calico.Cluster{Installation: installation(nil)}
	o := recorded(c)
	expectPlan(t, WindowsDataplane{}, migrate(c), "Installation default spec.calicoNetwork.windowsDataplane: <absent> -> HNS")
	on := &calico.Cluster{Installation: installation(func(i *operatorv1.Installation) {
		hns := operatorv1.WindowsDataplaneHNS
		i.Spec.CalicoNetwork.WindowsDataplane = &hns
		i.Spec.WindowsNodes = &operatorv1.WindowsNodeSpec{CNIBinDir: "/opt/cni/bin"}
	})}
	expectPlan(t, WindowsDataplane{}, migrate(on))
	expectPlan(t, WindowsDataplane{}, rollback(on, o),
		"Installation default spec.calicoNetwork.windowsDataplane: HNS -> <absent>",
		"Installation default spec.windowsNodes: <set by the Tigera operator> -> <absent>")
	kept := recorded(on)
	kept.WindowsDataplane = v1alpha1.OriginalValue{Present: true, Value: "Disabled"}
	expectPlan(t, WindowsDataplane{}, rollback(on, kept), "Installation default spec.calicoNetwork.windowsDataplane: HNS -> Disabled")
}

func nodeDaemonSet(host, port string, updated int32) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: calico.NodeDaemonSet, Generation: 2},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: calico.NodeContainer, Env: []corev1.EnvVar{{Name: calico.ServiceHostKey, Value: host}, {Name: calico.ServicePortKey, Value: port}},
		}}}}},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: updated, NumberAvailable: updated},
	}
}

func endpoint(host, port string) *corev1.ConfigMap {
	return &corev1.ConfigMap{Data: map[string]string{calico.ServiceHostKey: host, calico.ServicePortKey: port}}
}

func TestServicesEndpointDiff(t *testing.T) {
	inst := installation(nil)
	before := &calico.Cluster{Installation: inst, Node: nodeDaemonSet("10.96.0.1", "443", 3)}
	o := recorded(before)
	expectPlan(t, ServicesEndpoint{}, migrate(before),
		"ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_HOST: <absent> -> 10.0.0.10",
		"ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_PORT: <absent> -> 6443")
	migrated := &calico.Cluster{Installation: inst, Node: nodeDaemonSet("10.0.0.10", "6443", 3), ServicesEndpoint: endpoint("10.0.0.10", "6443")}
	expectPlan(t, ServicesEndpoint{}, migrate(migrated))

	// The rollback of a ConfigMap that did not exist hands the old address
	// over first, then deletes the ConfigMap.
	expectPlan(t, ServicesEndpoint{}, rollback(migrated, o),
		"ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_HOST: 10.0.0.10 -> 10.96.0.1",
		"ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_PORT: 6443 -> 443",
		"ConfigMap tigera-operator/kubernetes-services-endpoint (object): present -> <absent> (deleted once calico-node runs with the address it had before)")
	handedOver := &calico.Cluster{Installation: inst, Node: nodeDaemonSet("10.96.0.1", "443", 1), ServicesEndpoint: endpoint("10.96.0.1", "443")}
	if due := calico.Due(ServicesEndpoint{}.Diff(rollback(handedOver, o))); len(due) != 0 {
		t.Errorf("the ConfigMap is deleted before calico-node rolled out with the old address: %v", due)
	}
	if ok, why := (ServicesEndpoint{}).Settled(rollback(handedOver, o)); ok || !strings.Contains(why, "1 of 3 updated") {
		t.Errorf("settled %v (%s) during the handover rollout", ok, why)
	}
	rolledOut := &calico.Cluster{Installation: inst, Node: nodeDaemonSet("10.96.0.1", "443", 3), ServicesEndpoint: endpoint("10.96.0.1", "443")}
	expectPlan(t, ServicesEndpoint{}, rollback(rolledOut, o),
		"ConfigMap tigera-operator/kubernetes-services-endpoint (object): present -> <absent> (deleted)")

	// A ConfigMap that existed gets its values back.
	existed := recorded(&calico.Cluster{Installation: inst, Node: nodeDaemonSet("10.0.0.2", "6443", 3), ServicesEndpoint: endpoint("10.0.0.2", "6443")})
	expectPlan(t, ServicesEndpoint{}, rollback(migrated, existed),
		"ConfigMap tigera-operator/kubernetes-services-endpoint data.KUBERNETES_SERVICE_HOST: 10.0.0.10 -> 10.0.0.2")
}

func health(gen int64, names ...string) map[string]calico.Health {
	m := map[string]calico.Health{}
	for _, n := range names {
		m[n] = calico.Health{Name: n, Found: true, Available: true, ObservedGeneration: gen}
	}
	return m
}

func TestEncapsulationSettled(t *testing.T) {
	inst := installation(func(i *operatorv1.Installation) {
		i.Generation = 4
		for k := range i.Spec.CalicoNetwork.IPPools[:3] {
			i.Spec.CalicoNetwork.IPPools[k].Encapsulation = operatorv1.EncapsulationVXLAN
		}
	})
	pool := func(name, cidr string, mode calicov3.VXLANMode) calicov3.IPPool {
		return calicov3.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: calicov3.IPPoolSpec{CIDR: cidr, VXLANMode: mode}}
	}
	pools := []calicov3.IPPool{pool("v4-a", "192.168.0.0/16", calicov3.VXLANModeAlways), pool("v4-b", "10.244.0.0/16", calicov3.VXLANModeAlways),
		pool("v4-c", "10.250.0.0/16", calicov3.VXLANModeAlways), pool("v6", "fd00:10::/48", calicov3.VXLANModeNever)}
	c := &calico.Cluster{Installation: inst, Pools: pools, Health: health(4, calico.StatusIPPools, calico.StatusCalico)}
	if ok, why := (Encapsulation{}).Settled(migrate(c)); !ok {
		t.Errorf("not settled, IPv6 pool left alone: %s", why)
	}
	c.Pools[2].Spec.VXLANMode = calicov3.VXLANModeCrossSubnet
	if ok, why := (Encapsulation{}).Settled(migrate(c)); ok || !strings.Contains(why, "IPPool v4-c to get vxlanMode Always (is CrossSubnet)") {
		t.Errorf("settled %v: %s", ok, why)
	}
	c.Pools[2].Spec.VXLANMode = calicov3.VXLANModeAlways
	c.Pools = append(c.Pools, pool("foreign", "10.99.0.0/16", calicov3.VXLANModeNever))
	if ok, why := (Encapsulation{}).Settled(migrate(c)); ok || !strings.Contains(why, "IPPool foreign (10.99.0.0/16, not in the Installation)") {
		t.Errorf("settled %v with a foreign pool without VXLAN: %s", ok, why)
	}
	c.Health = health(3, calico.StatusIPPools, calico.StatusCalico)
	c.Pools = pools
	if ok, why := (Encapsulation{}).Settled(migrate(c)); ok || !strings.Contains(why, "observe Installation generation 4") {
		t.Errorf("settled %v on an older generation: %s", ok, why)
	}
	c.Installation.Status.Computed = c.Installation.Spec.DeepCopy()
	if ok, why := (Encapsulation{}).Settled(migrate(c)); !ok {
		t.Errorf("not settled with the spec computed and the pools written, before the status tick: %s", why)
	}
	c.Installation.Status.Computed.CalicoNetwork.IPPools[0].Encapsulation = operatorv1.EncapsulationVXLANCrossSubnet
	if ok, why := (Encapsulation{}).Settled(migrate(c)); ok || !strings.Contains(why, "observe Installation generation 4") {
		t.Errorf("settled %v on the previous spec computed: %s", ok, why)
	}
	c.Installation.Status.Computed = c.Installation.Spec.DeepCopy()
	c.Health[calico.StatusIPPools] = calico.Health{Name: calico.StatusIPPools, Found: true, Degraded: true, ObservedGeneration: 3,
		Message: "Unable to modify IP pools while Calico API server is unavailable"}
	if ok, why := (Encapsulation{}).Settled(migrate(c)); ok || !strings.Contains(why, "TigeraStatus ippools to recover from Degraded") {
		t.Errorf("settled %v with ippools Degraded: %s", ok, why)
	}
	c.Health = health(3, calico.StatusIPPools, calico.StatusCalico)
	c.Pools[0].Spec.VXLANMode = calicov3.VXLANModeCrossSubnet
	if ok, why := (Encapsulation{}).Settled(migrate(c)); ok || !strings.Contains(why, "IPPool v4-a to get vxlanMode Always") {
		t.Errorf("settled %v with the spec computed but a pool not yet written: %s", ok, why)
	}
}

func TestBGPSettled(t *testing.T) {
	inst := installation(func(i *operatorv1.Installation) { i.Generation = 2 })
	ds := nodeDaemonSet("", "", 3)
	c := &calico.Cluster{Installation: inst, Node: ds, Health: health(2, calico.StatusCalico)}
	if ok, why := (BGP{}).Settled(migrate(c)); ok || !strings.Contains(why, "CALICO_NETWORKING_BACKEND=vxlan") {
		t.Errorf("settled %v before calico-node runs VXLAN: %s", ok, why)
	}
	ds.Spec.Template.Spec.Containers[0].Env = append(ds.Spec.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: calico.NetworkingBackendEnv, Value: calico.BackendVXLAN})
	if ok, why := (BGP{}).Settled(migrate(c)); !ok {
		t.Errorf("not settled: %s", why)
	}
}
