package preflight

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/detect"
)

func installationWith(pools ...operatorv1.IPPool) *operatorv1.Installation {
	return &operatorv1.Installation{Spec: operatorv1.InstallationSpec{
		CalicoNetwork: &operatorv1.CalicoNetworkSpec{IPPools: pools}}}
}

var crossSubnet = operatorv1.IPPool{Name: "default-ipv4-ippool", CIDR: "172.20.0.0/16",
	Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet, BlockSize: ptr.To[int32](26)}

func healthy() Inputs {
	return Inputs{Installation: installationWith(crossSubnet), CalicoAPIServed: true,
		DNSService: client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, DNSServiceFound: true,
		Nodes: []NodeAddresses{{Name: "linux-0", OS: "linux"}, {Name: "cp-0", OS: "linux", ControlPlane: true}}}
}

// daemonSet builds a DaemonSet whose pod template has nodeSelector and one
// container; edit adjusts the rest.
func daemonSet(ns, name string, nodeSelector map[string]string, c corev1.Container, edit ...func(*appsv1.DaemonSet)) DaemonSetSummary {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: nodeSelector, Containers: []corev1.Container{c}}}}}
	for _, e := range edit {
		e(ds)
	}
	return SummarizeDaemonSet(ds)
}

var (
	onWindows = map[string]string{"kubernetes.io/os": "windows"}
	onLinux   = map[string]string{"kubernetes.io/os": "linux"}
)

// kubeProxyOnWindows is a HostProcess kube-proxy DaemonSet for Windows nodes
// with image and env KUBE_NETWORK (none when "").
func kubeProxyOnWindows(image, network string) DaemonSetSummary {
	c := corev1.Container{Name: "kube-proxy", Image: image, Args: []string{"$env:CONTAINER_SANDBOX_MOUNT_POINT/kube-proxy/start.ps1"}}
	if network != "" {
		c.Env = []corev1.EnvVar{{Name: "KUBE_NETWORK", Value: network}}
	}
	return daemonSet("kube-system", "kube-proxy-windows", onWindows, c)
}

const (
	sigWindowsCalico = "sigwindowstools/kube-proxy:v1.33.0-calico-hostprocess"
	sigWindowsOther  = "example.com/kube-proxy:v1.33.0-hostprocess"
)

// requiredOS is a required node affinity on kubernetes.io/os.
func requiredOS(op corev1.NodeSelectorOperator, values ...string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/os", Operator: op, Values: values}}}}}}}
	}
}

func blocks(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		out = append(out, netip.MustParsePrefix(c))
	}
	return out
}

// calicoAt is the healthy cluster running Calico v.
func calicoAt(v string) func() Inputs {
	return func() Inputs {
		in := healthy()
		in.Installation.Status.CalicoVersion, in.Installation.Status.Variant = v, operatorv1.Calico
		return in
	}
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
		{"a tested Calico version passes", calicoAt("v3.32.0"), v1alpha1.PreflightSpec{}, CheckCalicoVersion, v1alpha1.CheckPass,
			"Calico v3.32.0 (Calico): winready is tested with Calico v3.28 to v3.32"},
		{"the oldest tested Calico passes", calicoAt("v3.28.1"), v1alpha1.PreflightSpec{}, CheckCalicoVersion, v1alpha1.CheckPass, "Calico v3.28.1"},
		{"a Calico older than the oldest tested fails, naming its version", calicoAt("v3.27.0"), v1alpha1.PreflightSpec{},
			CheckCalicoVersion, v1alpha1.CheckFail, "Calico v3.27.0 is older than winready's oldest tested version"},
		{"an older Calico acknowledged warns", calicoAt("v3.25.0"),
			v1alpha1.PreflightSpec{Acknowledge: []v1alpha1.Acknowledgement{v1alpha1.AcknowledgeUntestedCalicoVersion}},
			CheckCalicoVersion, v1alpha1.CheckWarn, "Calico v3.25.0 is older than winready's oldest tested version"},
		{"a Calico newer than the newest tested warns", calicoAt("v3.33.0"), v1alpha1.PreflightSpec{},
			CheckCalicoVersion, v1alpha1.CheckWarn, "Calico v3.33.0 is newer than winready's newest tested version"},
		{"an unreadable Calico version warns", calicoAt("master"), v1alpha1.PreflightSpec{},
			CheckCalicoVersion, v1alpha1.CheckWarn, `Calico "master" (Calico) is not a version winready can read`},
		{"a missing kube-dns fails, naming it", func() Inputs { in := healthy(); in.DNSServiceFound = false; return in },
			v1alpha1.PreflightSpec{}, CheckKubeDNS, v1alpha1.CheckFail,
			`Service kube-system/kube-dns is missing: for kubernetesProvider "none (kubeadm and other upstream distributions)"`},
		{"a missing RKE2 DNS Service fails, naming it", func() Inputs {
			in := healthy()
			in.Installation.Spec.KubernetesProvider = operatorv1.ProviderRKE2
			in.DNSService, in.DNSServiceFound = client.ObjectKey{Namespace: "kube-system", Name: "rke2-coredns-rke2-coredns"}, false
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeDNS, v1alpha1.CheckFail,
			`Service kube-system/rke2-coredns-rke2-coredns is missing: for kubernetesProvider "RKE2"`},
		{"the provider is shown with its DNS Service", func() Inputs {
			in := healthy()
			in.Installation.Spec.KubernetesProvider = operatorv1.ProviderRKE2
			return in
		}, v1alpha1.PreflightSpec{}, CheckProvider, v1alpha1.CheckInfo,
			"kubernetesProvider RKE2; the cluster DNS Service for it is kube-system/rke2-coredns-rke2-coredns"},
		{"no overlay passes", healthy, v1alpha1.PreflightSpec{}, CheckOverlay, v1alpha1.CheckPass, "no Installation overlay"},
		{"an overlay with bgp Enabled fails with the patch that removes it", func() Inputs {
			in := healthy()
			in.Overlay = &operatorv1.Installation{Spec: operatorv1.InstallationSpec{
				CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckOverlay, v1alpha1.CheckFail,
			`Installation overlay sets spec.calicoNetwork.bgp: Enabled; the Tigera operator merges the overlay over Installation default` +
				`, so these win over what winready writes into default and the migration would wait for a change that never comes. ` +
				`Remove them from the overlay where it is managed (winready changes them in default, and restores them there on rollback), ` +
				`e.g. kubectl patch installation overlay --type merge -p '{"spec":{"calicoNetwork":{"bgp":null}}}'`},
		{"an overlay with pools and serviceCIDRs fails naming both", func() Inputs {
			in := healthy()
			in.Overlay = &operatorv1.Installation{Spec: operatorv1.InstallationSpec{ServiceCIDRs: []string{"10.96.0.0/12"},
				CalicoNetwork: &operatorv1.CalicoNetworkSpec{IPPools: []operatorv1.IPPool{crossSubnet}}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckOverlay, v1alpha1.CheckFail,
			`sets spec.calicoNetwork.ipPools: [default-ipv4-ippool 172.20.0.0/16 encapsulation VXLANCrossSubnet], spec.serviceCIDRs: [10.96.0.0/12]`},
		{"an overlay of other fields passes", func() Inputs {
			in := healthy()
			in.Overlay = &operatorv1.Installation{Spec: operatorv1.InstallationSpec{
				CalicoNetwork: &operatorv1.CalicoNetworkSpec{MTU: ptr.To[int32](1400)}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckOverlay, v1alpha1.CheckPass, "sets none of the fields winready changes"},
		{"several API server endpoints without a stable address fail, listing them", func() Inputs {
			in := healthy()
			in.APIServer.Detected = &detect.Endpoint{Host: "10.0.0.1", Port: "6443", Source: detect.SourceEndpointSlice,
				Members: []string{"10.0.0.1:6443", "10.0.0.2:6443", "10.0.0.3:6443"}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckAPIServer, v1alpha1.CheckFail,
			"the control plane has 3 API server endpoints (10.0.0.1:6443, 10.0.0.2:6443, 10.0.0.3:6443) and no stable address"},
		{"one API server endpoint warns", func() Inputs {
			in := healthy()
			in.APIServer.Detected = &detect.Endpoint{Host: "10.0.0.1", Port: "6443", Source: detect.SourceEndpointSlice,
				Members: []string{"10.0.0.1:6443"}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckAPIServer, v1alpha1.CheckWarn, "calico-node will use 10.0.0.1:6443, the only API server endpoint"},
		{"spec.apiServer passes whatever the endpoints", func() Inputs {
			in := healthy()
			in.APIServer.Spec = "api.example.com:6443"
			return in
		}, v1alpha1.PreflightSpec{}, CheckAPIServer, v1alpha1.CheckPass, "spec.apiServer api.example.com:6443"},
		{"kubeadm's controlPlaneEndpoint passes", func() Inputs {
			in := healthy()
			in.APIServer.Detected = &detect.Endpoint{Host: "10.0.0.10", Port: "6443", Source: "kubeadm-config controlPlaneEndpoint"}
			return in
		}, v1alpha1.PreflightSpec{}, CheckAPIServer, v1alpha1.CheckPass, "10.0.0.10:6443 from kubeadm-config controlPlaneEndpoint"},
		{"an Installation without Helm's marks passes", healthy, v1alpha1.PreflightSpec{}, CheckHelm, v1alpha1.CheckPass, "no mark of a Helm release"},
		{"an Installation of the tigera-operator chart fails with the values", func() Inputs {
			in := healthy()
			in.HelmEvidence, in.HelmRelease = "annotation meta.helm.sh/release-name=calico", "calico"
			return in
		}, v1alpha1.PreflightSpec{}, CheckHelm, v1alpha1.CheckFail,
			"Installation default is rendered by calico (annotation meta.helm.sh/release-name=calico): the next helm upgrade puts back every " +
				"field winready changes. Carry the same changes in the release's values (helm upgrade ... -f values.yaml):\n" +
				"installation:\n  calicoNetwork:\n    bgp: Disabled\n    windowsDataplane: HNS\n    ipPools:  # keep each pool's other fields as they are\n" +
				"    - name: default-ipv4-ippool\n      cidr: 172.20.0.0/16\n      encapsulation: VXLAN\n"},
		{"an RKE2 Installation fails naming the HelmChartConfig", func() Inputs {
			in := healthy()
			in.Installation.Spec.KubernetesProvider = operatorv1.ProviderRKE2
			in.HelmEvidence, in.HelmRelease = `field manager "helm"`, ""
			return in
		}, v1alpha1.PreflightSpec{}, CheckHelm, v1alpha1.CheckFail, "a HelmChartConfig named rke2-calico in kube-system"},
		{"an acknowledged Helm release warns", func() Inputs {
			in := healthy()
			in.HelmEvidence, in.HelmRelease = "label app.kubernetes.io/managed-by=Helm", ""
			return in
		}, v1alpha1.PreflightSpec{Acknowledge: []v1alpha1.Acknowledgement{v1alpha1.AcknowledgeHelmManagedInstallation}},
			CheckHelm, v1alpha1.CheckWarn, "(acknowledged)"},
		{"the VPP dataplane fails", func() Inputs {
			in := healthy()
			in.Installation.Spec.CalicoNetwork.LinuxDataplane = ptr.To(operatorv1.LinuxDataplaneVPP)
			return in
		}, v1alpha1.PreflightSpec{}, CheckDataplane, v1alpha1.CheckFail, `linuxDataplane is VPP: the Tigera operator rejects bgp Disabled with it ("VPP requires BGP to be enabled")`},
		{"the iptables dataplane passes", healthy, v1alpha1.PreflightSpec{}, CheckDataplane, v1alpha1.CheckPass, "Linux dataplane Iptables"},
		{"a LoadBalancer pool in the Installation fails without advising VXLAN", func() Inputs {
			in := healthy()
			in.Installation = installationWith(crossSubnet, operatorv1.IPPool{Name: "lb", CIDR: "10.50.0.0/24",
				Encapsulation: operatorv1.EncapsulationNone, AllowedUses: []operatorv1.IPPoolAllowedUse{operatorv1.IPPoolAllowedUseLoadBalancer}})
			return in
		}, v1alpha1.PreflightSpec{}, CheckLBPools, v1alpha1.CheckFail, "IP pools lb (10.50.0.0/24, in the Installation) serve LoadBalancer addresses"},
		{"a LoadBalancer pool is left to its own check", func() Inputs {
			in := healthy()
			in.Installation = installationWith(crossSubnet, operatorv1.IPPool{Name: "lb", CIDR: "10.50.0.0/24",
				Encapsulation: operatorv1.EncapsulationNone, AllowedUses: []operatorv1.IPPoolAllowedUse{operatorv1.IPPoolAllowedUseLoadBalancer}})
			return in
		}, v1alpha1.PreflightSpec{}, CheckUnencapsulated, v1alpha1.CheckPass, "every Installation pool is encapsulated"},
		{"a LoadBalancer IPPool outside the Installation fails", func() Inputs {
			in := healthy()
			in.Pools = []calicov3.IPPool{{ObjectMeta: metav1.ObjectMeta{Name: "metallb-like"}, Spec: calicov3.IPPoolSpec{CIDR: "10.60.0.0/24",
				AllowedUses: []calicov3.IPPoolAllowedUse{calicov3.IPPoolAllowedUseLoadBalancer}}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckLBPools, v1alpha1.CheckFail, "IP pools metallb-like (10.60.0.0/24) serve LoadBalancer addresses"},
		{"an ImageSet without the Windows images fails, naming them", func() Inputs {
			in := healthy()
			in.Installation.Status.CalicoVersion, in.Installation.Status.Variant = "v3.32.0", operatorv1.Calico
			in.ImageSets = []operatorv1.ImageSet{{ObjectMeta: metav1.ObjectMeta{Name: "calico-v3.32.0"},
				Spec: operatorv1.ImageSetSpec{Images: []operatorv1.Image{{Image: "calico/node", Digest: "sha256:1"}, {Image: "calico/cni-windows", Digest: "sha256:2"}}}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckImageSet, v1alpha1.CheckFail,
			"ImageSet calico-v3.32.0 pins the images of Calico v3.32.0 but lists no calico/node-windows: the Tigera operator's Windows controller " +
				"resolves calico-node-windows through it and would stay Degraded (\"Error resolving ImageSet for components\") after BGP is off. " +
				"Add to its spec.images {image: calico/node-windows, digest: sha256:<digest of calico/node-windows:v3.32.0>}"},
		{"an ImageSet with the Windows images passes", func() Inputs {
			in := healthy()
			in.Installation.Status.CalicoVersion, in.Installation.Status.Variant = "v3.32.0", operatorv1.Calico
			in.ImageSets = []operatorv1.ImageSet{{ObjectMeta: metav1.ObjectMeta{Name: "calico-v3.32.0"},
				Spec: operatorv1.ImageSetSpec{Images: []operatorv1.Image{{Image: "calico/node-windows"}, {Image: "calico/cni-windows"}}}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckImageSet, v1alpha1.CheckPass, "ImageSet calico-v3.32.0 lists calico/cni-windows and calico/node-windows"},
		{"an ImageSet for another version is not checked", func() Inputs {
			in := healthy()
			in.Installation.Status.CalicoVersion, in.Installation.Status.Variant = "v3.32.0", operatorv1.Calico
			in.ImageSets = []operatorv1.ImageSet{{ObjectMeta: metav1.ObjectMeta{Name: "calico-v3.31.0"}}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckImageSet, v1alpha1.CheckInfo, "no ImageSet named calico-v3.32.0"},
		{"host-local IPAM fails", func() Inputs {
			in := healthy()
			in.Installation.Spec.CNI = &operatorv1.CNISpec{Type: operatorv1.PluginCalico, IPAM: &operatorv1.IPAMSpec{Type: operatorv1.IPAMPluginHostLocal}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckCNI, v1alpha1.CheckFail, "spec.cni.ipam.type is HostLocal: the Tigera operator rejects VXLAN pools with it"},
		{"another CNI plugin fails", func() Inputs {
			in := healthy()
			in.Installation.Spec.CNI = &operatorv1.CNISpec{Type: operatorv1.PluginAmazonVPC}
			return in
		}, v1alpha1.PreflightSpec{}, CheckCNI, v1alpha1.CheckFail, "spec.cni.type is AmazonVPC"},
		{"Calico CNI and IPAM pass", func() Inputs {
			in := healthy()
			in.Installation.Spec.CNI = &operatorv1.CNISpec{Type: operatorv1.PluginCalico, IPAM: &operatorv1.IPAMSpec{Type: operatorv1.IPAMPluginCalico}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckCNI, v1alpha1.CheckPass, "Calico CNI with Calico IPAM"},
		{"OpenShift is refused", func() Inputs {
			in := healthy()
			in.Installation.Spec.KubernetesProvider = operatorv1.ProviderOpenShift
			return in
		}, v1alpha1.PreflightSpec{}, CheckProvider, v1alpha1.CheckFail, "kubernetesProvider OpenShift is not supported"},

		// VXLAN overrides on calico-node.
		{"a low FELIX_VXLANVNI on calico-node fails, naming it and the DaemonSet", func() Inputs {
			in := healthy()
			in.CalicoNodeEnv = map[string]string{"FELIX_VXLANVNI": "100"}
			return in
		}, v1alpha1.PreflightSpec{}, CheckVXLANSettings, v1alpha1.CheckFail,
			`env FELIX_VXLANVNI="100" on the calico-node container of DaemonSet calico-system/calico-node overrides FelixConfiguration default`},
		{"another FELIX_VXLANPORT on calico-node fails", func() Inputs {
			in := healthy()
			in.CalicoNodeEnv = map[string]string{"FELIX_VXLANPORT": "8472"}
			return in
		}, v1alpha1.PreflightSpec{}, CheckVXLANSettings, v1alpha1.CheckFail, `FELIX_VXLANPORT="8472"`},
		{"a FELIX_VXLANVNI that is no number fails", func() Inputs {
			in := healthy()
			in.CalicoNodeEnv = map[string]string{"FELIX_VXLANVNI": "lots"}
			return in
		}, v1alpha1.PreflightSpec{}, CheckVXLANSettings, v1alpha1.CheckFail, `FELIX_VXLANVNI="lots"`},
		{"calico-node overrides Windows accepts pass with the values in force", func() Inputs {
			in := healthy()
			in.CalicoNodeEnv = map[string]string{"FELIX_VXLANPORT": "4789", "FELIX_VXLANVNI": "5000"}
			return in
		}, v1alpha1.PreflightSpec{}, CheckVXLANSettings, v1alpha1.CheckPass, "port 4789, VNI 5000"},

		// Linux workers.
		{"a Linux worker passes", healthy, v1alpha1.PreflightSpec{}, CheckLinuxWorkers, v1alpha1.CheckPass,
			"1 schedulable Linux workers run CoreDNS, the Tigera operator and Typha: linux-0"},
		{"a node without an OS label counts as Linux", func() Inputs {
			in := healthy()
			in.Nodes = []NodeAddresses{{Name: "old-0"}, {Name: "win-0", OS: "windows"}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckLinuxWorkers, v1alpha1.CheckPass, ": old-0"},
		{"only control-plane, cordoned and Windows nodes fail", func() Inputs {
			in := healthy()
			in.Nodes = []NodeAddresses{{Name: "cp-0", OS: "linux", ControlPlane: true}, {Name: "old-master", ControlPlane: true},
				{Name: "linux-0", OS: "linux", Unschedulable: true}, {Name: "win-0", OS: "windows"}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckLinuxWorkers, v1alpha1.CheckFail,
			"no schedulable Linux worker (of 3 Linux nodes, 2 are control-plane and 1 cordoned)"},

		// IPAM capacity for Windows nodes.
		{"capacity without an expected count is information with the pods per node", healthy, v1alpha1.PreflightSpec{},
			CheckIPAMCapacity, v1alpha1.CheckInfo,
			"1022 blocks free in total, one per Windows node under strictAffinity (default-ipv4-ippool (172.20.0.0/16): 1024 of 1024 blocks free, " +
				"60 pods per Windows node; 2 of the shared blocks go to Linux nodes that need one (StrictAffinityCapacity)); set spec.windowsNodes.expected to check"},
		{"capacity for the expected Windows nodes passes as information", func() Inputs {
			in := healthy()
			in.ExpectedWindowsNodes = ptr.To[int32](1021)
			in.BlockCIDRs = blocks("172.20.0.0/26", "172.20.0.64/26", "172.20.1.0/26", "10.9.0.0/26")
			in.Blocks = []BlockUsage{{CIDR: netip.MustParsePrefix("172.20.0.0/26"), Node: "linux-0", Free: 3},
				{CIDR: netip.MustParsePrefix("172.20.0.64/26"), Node: "cp-0", Free: 1}}
			return in
		}, v1alpha1.PreflightSpec{}, CheckIPAMCapacity, v1alpha1.CheckInfo,
			"1021 blocks free in total for 1021 expected Windows nodes (default-ipv4-ippool (172.20.0.0/16): 1021 of 1024 blocks free, 60 pods per Windows node)"},
		{"more expected Windows nodes than free blocks fail", func() Inputs {
			in := healthy()
			in.Installation = installationWith(operatorv1.IPPool{Name: "small", CIDR: "172.20.0.0/24", BlockSize: ptr.To[int32](28)})
			in.ExpectedWindowsNodes = ptr.To[int32](16)
			in.BlockCIDRs = blocks("172.20.0.0/28")
			return in
		}, v1alpha1.PreflightSpec{}, CheckIPAMCapacity, v1alpha1.CheckFail,
			"spec.windowsNodes.expected is 16 but only 13 blocks are free in total (small (172.20.0.0/24): 15 of 16 blocks free, 12 pods per Windows node; " +
				"2 of the shared blocks go to Linux nodes that need one (StrictAffinityCapacity)). With strictAffinity each Windows node needs a free block of its own"},
		{"pools for other nodes, disabled pools and IPv6 pools are not counted", func() Inputs {
			in := healthy()
			in.Installation = installationWith(
				operatorv1.IPPool{Name: "linux-only", CIDR: "172.20.0.0/16", NodeSelector: "kubernetes.io/os == 'linux'"},
				operatorv1.IPPool{Name: "win", CIDR: "172.21.0.0/24", NodeSelector: "kubernetes.io/os == 'windows'"},
				operatorv1.IPPool{Name: "all", CIDR: "172.22.0.0/25", NodeSelector: "all()"},
				operatorv1.IPPool{Name: "off", CIDR: "172.23.0.0/16", DisableNewAllocations: ptr.To(true)},
				operatorv1.IPPool{Name: "v6", CIDR: "fd00::/48"})
			in.ExpectedWindowsNodes = ptr.To[int32](7)
			return in
		}, v1alpha1.PreflightSpec{}, CheckIPAMCapacity, v1alpha1.CheckFail,
			`only 6 blocks are free in total (win (172.21.0.0/24): 4 of 4 blocks free, 60 pods per Windows node; all (172.22.0.0/25): 2 of 2 blocks free, 60 pods per Windows node; linux-only not counted: its nodeSelector "kubernetes.io/os == 'linux'" does not mention windows; win counted because its nodeSelector "kubernetes.io/os == 'windows'" mentions windows`},

		// Capacity under strictAffinity: the reference shape of a /24 pool in four /26 blocks, three affine and full,
		// one affine with room, one address borrowed by node-3.
		{"Linux nodes that would get no address under strictAffinity fail with the numbers", quarterFull,
			v1alpha1.PreflightSpec{}, CheckAffinityCapacity, v1alpha1.CheckFail,
			"after strictAffinity, 2 Linux nodes hold no block with a free address (node-2, node-3) but only 0 blocks are free in the pools " +
				"that serve them (small (172.20.0.0/24): 0 of 4 blocks free): without borrowing, new pods on 2 of them would get no address. " +
				"Add a larger or an additional IPv4 pool"},
		{"no free block for any Windows node fails", quarterFull, v1alpha1.PreflightSpec{}, CheckIPAMCapacity, v1alpha1.CheckFail,
			"no free block is left for any Windows node (small (172.20.0.0/24): 0 of 4 blocks free, 60 pods per Windows node)"},
		{"borrowed addresses do not advise a restart", quarterFull, v1alpha1.PreflightSpec{}, CheckBorrowed, v1alpha1.CheckWarn,
			"Do not restart those pods"},
		{"an additional pool gives the Linux and Windows nodes their blocks", func() Inputs {
			in := quarterFull()
			in.Installation.Spec.CalicoNetwork.IPPools = append(in.Installation.Spec.CalicoNetwork.IPPools,
				operatorv1.IPPool{Name: "more", CIDR: "172.21.0.0/24", BlockSize: ptr.To[int32](26)})
			in.ExpectedWindowsNodes = ptr.To[int32](2)
			return in
		}, v1alpha1.PreflightSpec{}, CheckIPAMCapacity, v1alpha1.CheckInfo, "2 blocks free in total for 2 expected Windows nodes"},
		{"an additional pool passes the Linux nodes", func() Inputs {
			in := quarterFull()
			in.Installation.Spec.CalicoNetwork.IPPools = append(in.Installation.Spec.CalicoNetwork.IPPools,
				operatorv1.IPPool{Name: "more", CIDR: "172.21.0.0/24", BlockSize: ptr.To[int32](26)})
			return in
		}, v1alpha1.PreflightSpec{}, CheckAffinityCapacity, v1alpha1.CheckPass, "2 Linux nodes need a new block for their next pods under strictAffinity and 4 are free"},

		// kube-proxy on Windows nodes.
		{"kube-proxy-windows on the Calico network passes", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{kubeProxyOnWindows(sigWindowsOther, "Calico.*")}
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckPass,
			`DaemonSet kube-system/kube-proxy-windows runs kube-proxy on Windows nodes with KUBE_NETWORK "Calico.*"`},
		{"kube-proxy selected by a required node affinity passes", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{daemonSet("kube-system", "kp-win", nil,
				corev1.Container{Name: "kp", Image: "example/proxy", Command: []string{"kube-proxy.exe"},
					Env: []corev1.EnvVar{{Name: "KUBE_NETWORK", Value: "calico"}}},
				requiredOS(corev1.NodeSelectorOpIn, "windows"))}
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckPass, "kube-system/kp-win"},
		{"no kube-proxy on Windows nodes warns with what to apply", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{daemonSet("kube-system", "kube-proxy", onLinux,
				corev1.Container{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.33.0"})}
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckWarn,
			`Windows nodes need kube-proxy in kernelspace mode as a HostProcess DaemonSet on the Calico network (sig-windows-tools' kube-proxy-windows`},
		{"absent kube-proxy warns with the KUBE_NETWORK it needs and when to apply it", healthy, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckWarn,
			`any other kube-proxy needs env KUBE_NETWORK matching "Calico", e.g. Calico.*); apply it before the first Windows node joins`},
		{"kube-proxy on Windows nodes on another network warns", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{kubeProxyOnWindows(sigWindowsCalico, "flannel.4096")}
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckWarn,
			`DaemonSet kube-system/kube-proxy-windows runs kube-proxy on Windows nodes with KUBE_NETWORK "flannel.4096": KUBE_NETWORK should match Calico`},
		{"kube-proxy on Windows nodes without KUBE_NETWORK warns", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{kubeProxyOnWindows(sigWindowsOther, "")}
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckWarn,
			"with no KUBE_NETWORK and image example.com/kube-proxy:v1.33.0-hostprocess: KUBE_NETWORK should match Calico"},
		{"sig-windows-tools' Calico kube-proxy, whose script sets KUBE_NETWORK, passes", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{kubeProxyOnWindows(sigWindowsCalico, "")}
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckPass,
			"DaemonSet kube-system/kube-proxy-windows runs kube-proxy on Windows nodes from the Calico image sigwindowstools/kube-proxy:v1.33.0-calico-hostprocess, which sets KUBE_NETWORK to Calico"},
		{"KUBE_NETWORK from a reference warns", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{daemonSet("kube-system", "kube-proxy-windows", onWindows, corev1.Container{
				Name: "kube-proxy", Image: sigWindowsCalico, Env: []corev1.EnvVar{{Name: "KUBE_NETWORK", ValueFrom: &corev1.EnvVarSource{
					ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "kp"}, Key: "network"}}}}})}
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckWarn, "with KUBE_NETWORK from a reference winready does not read"},
		{"a Linux selector next to a Windows affinity schedules nowhere, so it is not kube-proxy for Windows", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{daemonSet("kube-system", "odd", onLinux,
				corev1.Container{Name: "kube-proxy", Image: "sigwindowstools/kube-proxy:v1.33.0-calico-hostprocess",
					Env: []corev1.EnvVar{{Name: "KUBE_NETWORK", Value: "Calico.*"}}},
				requiredOS(corev1.NodeSelectorOpIn, "windows"))}
			return in
		}, v1alpha1.PreflightSpec{}, CheckKubeProxy, v1alpha1.CheckWarn, "no DaemonSet runs kube-proxy"},

		// DaemonSets that select no operating system.
		{"DaemonSets that select an OS pass; calico-system and the probe are left out", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{
				daemonSet("kube-system", "kube-proxy", onLinux, corev1.Container{Name: "kube-proxy"}),
				kubeProxyOnWindows(sigWindowsOther, "Calico.*"),
				daemonSet("monitoring", "agent", nil, corev1.Container{Name: "agent"}, requiredOS(corev1.NodeSelectorOpNotIn, "windows")),
				daemonSet("calico-system", "csi-node-driver", nil, corev1.Container{Name: "csi"}),
				daemonSet("winready-system", "winready-probe", nil, corev1.Container{Name: "agent"}),
			}
			return in
		}, v1alpha1.PreflightSpec{}, CheckLinuxOnlyDS, v1alpha1.CheckPass, "every DaemonSet outside calico-system selects kubernetes.io/os"},
		{"DaemonSets without an OS selector warn with the patch for the first", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{
				daemonSet("monitoring", "node-exporter", nil, corev1.Container{Name: "node-exporter"}),
				daemonSet("logging", "fluent-bit", map[string]string{"pool": "general"}, corev1.Container{Name: "fluent-bit"}),
			}
			return in
		}, v1alpha1.PreflightSpec{}, CheckLinuxOnlyDS, v1alpha1.CheckWarn,
			`DaemonSets logging/fluent-bit, monitoring/node-exporter select no kubernetes.io/os and would land on Windows nodes: add spec.template.spec.nodeSelector: {kubernetes.io/os: linux} to each where it is managed (manifest, Helm values), e.g. kubectl -n logging patch ds fluent-bit -p '{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/os":"linux"}}}}}'`},
		{"a required node affinity with a term outside kubernetes.io/os warns", func() Inputs {
			in := healthy()
			in.DaemonSets = []DaemonSetSummary{daemonSet("storage", "csi", nil, corev1.Container{Name: "csi"}, func(ds *appsv1.DaemonSet) {
				requiredOS(corev1.NodeSelectorOpIn, "linux")(ds)
				terms := &ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				*terms = append(*terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "storage", Operator: corev1.NodeSelectorOpExists}}})
			})}
			return in
		}, v1alpha1.PreflightSpec{}, CheckLinuxOnlyDS, v1alpha1.CheckWarn, "DaemonSets storage/csi select no kubernetes.io/os"},
		{"many DaemonSets without an OS selector are bounded", func() Inputs {
			in := healthy()
			for i := range 12 {
				in.DaemonSets = append(in.DaemonSets, daemonSet("apps", fmt.Sprintf("ds-%02d", i), nil, corev1.Container{Name: "c"}))
			}
			return in
		}, v1alpha1.PreflightSpec{}, CheckLinuxOnlyDS, v1alpha1.CheckWarn, "apps/ds-09 and 2 more select no kubernetes.io/os"},
		{"a message stays within the status bound", func() Inputs {
			in := healthy()
			for i := range 12 {
				in.DaemonSets = append(in.DaemonSets, daemonSet(strings.Repeat("n", 63), fmt.Sprintf("%s-%02d", strings.Repeat("d", 250), i), nil, corev1.Container{Name: "c"}))
			}
			return in
		}, v1alpha1.PreflightSpec{}, CheckLinuxOnlyDS, v1alpha1.CheckWarn, "…"},
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
			if n := len([]rune(found.Message)); n > maxMessage {
				t.Fatalf("%s: message of %d characters, above the status bound of %d", tc.check, n, maxMessage)
			}
		})
	}
}

// TestEvaluateOrder pins the checks Evaluate reports and their order, with
// the projectcalico.org/v3 API served and without it.
func TestEvaluateOrder(t *testing.T) {
	for _, tc := range []struct {
		served bool
		want   []string
	}{
		{true, []string{CheckCalicoAPI, CheckProvider, CheckOverlay, CheckHelm, CheckCNI, CheckDataplane, CheckIPIPPools,
			CheckIPv6Pools, CheckUnencapsulated, CheckLBPools, CheckForeignPools, CheckVXLANSettings, CheckBGPPeers,
			CheckServiceAdverts, CheckAPIServer, CheckImageSet, CheckBlockSize, CheckKubeDNS, CheckNodePolicies, CheckBorrowed,
			CheckCalicoVersion, CheckLinuxWorkers, CheckAffinityCapacity, CheckIPAMCapacity, CheckKubeProxy, CheckLinuxOnlyDS}},
		{false, []string{CheckCalicoAPI, CheckProvider, CheckOverlay, CheckHelm, CheckCNI, CheckDataplane, CheckIPIPPools,
			CheckIPv6Pools, CheckUnencapsulated, CheckLBPools, CheckAPIServer, CheckImageSet, CheckBlockSize, CheckKubeDNS,
			CheckNodePolicies, CheckBorrowed, CheckCalicoVersion, CheckLinuxWorkers, CheckKubeProxy, CheckLinuxOnlyDS}},
	} {
		in := healthy()
		in.CalicoAPIServed = tc.served
		var got []string
		for _, c := range Evaluate(in, v1alpha1.PreflightSpec{}) {
			got = append(got, c.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("served %t: got checks\n%v\nwant\n%v", tc.served, got, tc.want)
		}
	}
}

// quarterFull is a /24 pool in four /26 blocks, every one affine: node-0's
// first and node-2's are full, node-1's and node-0's second have room; node-3
// holds none and borrows one address.
func quarterFull() Inputs {
	in := healthy()
	in.Installation = installationWith(operatorv1.IPPool{Name: "small", CIDR: "172.20.0.0/24", BlockSize: ptr.To[int32](26)})
	in.Nodes = []NodeAddresses{{Name: "node-0", OS: "linux"}, {Name: "node-1", OS: "linux"}, {Name: "node-2", OS: "linux"}, {Name: "node-3", OS: "linux"}}
	in.BlockCIDRs = blocks("172.20.0.0/26", "172.20.0.64/26", "172.20.0.128/26", "172.20.0.192/26")
	in.Blocks = []BlockUsage{
		{CIDR: netip.MustParsePrefix("172.20.0.0/26"), Node: "node-0", Free: 0},
		{CIDR: netip.MustParsePrefix("172.20.0.64/26"), Node: "node-1", Free: 2},
		{CIDR: netip.MustParsePrefix("172.20.0.128/26"), Node: "node-2", Free: 0},
		{CIDR: netip.MustParsePrefix("172.20.0.192/26"), Node: "node-0", Free: 20},
	}
	in.Borrowed = map[string]int{"node-3": 1}
	return in
}

func TestHelmOwnership(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta metav1.ObjectMeta
		want string
	}{
		{"none", metav1.ObjectMeta{}, ""},
		{"annotation", metav1.ObjectMeta{Annotations: map[string]string{"meta.helm.sh/release-name": "rke2-calico"}},
			"annotation meta.helm.sh/release-name=rke2-calico"},
		{"label", metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}}, "label app.kubernetes.io/managed-by=Helm"},
		{"field manager", metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}, {Manager: "helm"}}}, `field manager "helm"`},
		{"the operator's label is not Helm's", metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/managed-by": "tigera-operator"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := HelmOwnership(&operatorv1.Installation{ObjectMeta: tc.meta}); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
