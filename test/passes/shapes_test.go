package passes_test

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

// calicoState is every object the migration may change: a refused shape
// leaves all of it as it was.
type calicoState struct {
	Installation     operatorv1.InstallationSpec
	Pools            map[string]calicov3.IPPoolSpec
	IPAM             *calicov3.IPAMConfigurationSpec
	ServicesEndpoint map[string]string
}

func (b *inlineBed) calicoStateNow() calicoState {
	s := calicoState{Installation: b.on.Installation().Spec, Pools: map[string]calicov3.IPPoolSpec{}}
	pools := &calicov3.IPPoolList{}
	Expect(b.k8s.List(ctx, pools)).To(Succeed())
	for _, p := range pools.Items {
		s.Pools[p.Name] = p.Spec
	}
	if cfg := b.on.IPAMConfig(); cfg != nil {
		s.IPAM = &cfg.Spec
	}
	if cm := b.on.ServicesEndpoint(); cm != nil {
		s.ServicesEndpoint = cm.Data
	}
	return s
}

// refusedBeforeAnyChange runs winready on the seeded cluster, without the node
// rounds, and expects the preflight check name to fail with every message,
// the migration Stalled and Calico's objects as they were.
func refusedBeforeAnyChange(b *inlineBed, name string, messages ...string) {
	GinkgoHelper()
	before := b.calicoStateNow()
	b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
		wr.Spec.Preflight.SkipNetworkProbe = true
		wr.Spec.PodNetworkCheck.Disabled = true
	})
	matchers := []types.GomegaMatcher{HaveField("Result", v1alpha1.CheckFail)}
	for _, m := range messages {
		matchers = append(matchers, HaveField("Message", ContainSubstring(m)))
	}
	reconcileUntil(b, b.on.Check(name), And(matchers...))
	reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonPreflightFailed))
	b.rest(time.Hour)
	Expect(b.calicoStateNow()).To(Equal(before), "a failed preflight changes nothing")
}

var _ = Describe("Cluster shapes the Tigera operator would refuse after a change", func() {
	var b *inlineBed

	DescribeTable("are refused before the first change, naming the object and the fix",
		func(cluster func() calicosim.Cluster, objects func() []client.Object, mutate func(*v1alpha1.WindowsReadiness),
			name string, result v1alpha1.CheckResult, message string) {
			b = driveInline(cluster())
			for _, obj := range objects() {
				Expect(b.on.CreateOrReplace(obj)).To(Succeed())
				DeferCleanup(func() { Expect(client.IgnoreNotFound(b.k8s.Delete(ctx, obj))).To(Succeed()) })
			}
			before := b.calicoStateNow()
			b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
				wr.Spec.Preflight.SkipNetworkProbe = true
				wr.Spec.PodNetworkCheck.Disabled = true
				if mutate != nil {
					mutate(wr)
				}
			})
			reconcileUntil(b, b.on.Check(name), And(HaveField("Result", result), HaveField("Message", ContainSubstring(message))))
			if result != v1alpha1.CheckFail {
				return
			}
			reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonPreflightFailed))
			b.rest(time.Hour)
			Expect(b.on.WR().Status.Message).To(ContainSubstring(message))
			Expect(b.on.WR().Status.Originals).To(BeNil(), "a failed preflight records nothing")
			Expect(b.calicoStateNow()).To(Equal(before), "a failed preflight changes nothing")
		},
		Entry("no kube-dns Service", func() calicosim.Cluster {
			cl := calicosim.MainCluster()
			cl.WithoutDNSService = true
			return cl
		}, noObjects, nil, preflight.CheckKubeDNS, v1alpha1.CheckFail, "Service kube-system/kube-dns is missing"),
		Entry("RKE2 without its DNS Service, although kube-dns exists", func() calicosim.Cluster {
			cl := calicosim.MainCluster()
			cl.Provider, cl.WithoutDNSService = operatorv1.ProviderRKE2, true
			return cl
		}, func() []client.Object {
			return []client.Object{&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}}
		}, nil, preflight.CheckKubeDNS, v1alpha1.CheckFail, "Service kube-system/rke2-coredns-rke2-coredns is missing"),
		Entry("RKE2 with its DNS Service passes", func() calicosim.Cluster {
			cl := calicosim.MainCluster()
			cl.Provider = operatorv1.ProviderRKE2
			return cl
		}, noObjects, nil, preflight.CheckKubeDNS, v1alpha1.CheckPass, "Service kube-system/rke2-coredns-rke2-coredns exists"),
		Entry("an overlay Installation with bgp Enabled", func() calicosim.Cluster {
			cl := calicosim.MainCluster()
			bgp := operatorv1.BGPEnabled
			cl.Overlay = &operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: &bgp}}
			return cl
		}, noObjects, nil, preflight.CheckOverlay, v1alpha1.CheckFail,
			`Installation overlay sets spec.calicoNetwork.bgp: Enabled; the Tigera operator merges the overlay over Installation default`),
		Entry("an overlay Installation with CrossSubnet pools", func() calicosim.Cluster {
			cl := calicosim.MainCluster()
			cl.Overlay = &operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{IPPools: cl.Pools}}
			return cl
		}, noObjects, nil, preflight.CheckOverlay, v1alpha1.CheckFail,
			`kubectl patch installation overlay --type merge -p '{"spec":{"calicoNetwork":{"ipPools":null}}}'`),
		Entry("several API server endpoints and no stable address", withoutKubeadmConfig, twoAPIServers, nil, preflight.CheckAPIServer, v1alpha1.CheckFail, "10.0.0.2:6443, 10.0.0.3:6443) and no stable address"),
		Entry("several API server endpoints with spec.apiServer pass", withoutKubeadmConfig, twoAPIServers, func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: "10.0.0.10", Port: 6443}
		}, preflight.CheckAPIServer, v1alpha1.CheckPass, "calico-node will use spec.apiServer 10.0.0.10:6443"),
		Entry("a pool whose blocks are all held, two Linux nodes without room", smallPool, fullPoolBlocks, nil,
			preflight.CheckAffinityCapacity, v1alpha1.CheckFail,
			"after strictAffinity, 2 Linux nodes hold no block with a free address (linux-1, linux-2) but only 0 blocks are free"),
		Entry("a pool whose blocks are all held leaves no block for any Windows node", smallPool, fullPoolBlocks, nil,
			preflight.CheckIPAMCapacity, v1alpha1.CheckFail, "no free block is left for any Windows node"),
		Entry("an ImageSet without the Windows images", calicosim.MainCluster, func() []client.Object {
			return []client.Object{&operatorv1.ImageSet{ObjectMeta: metav1.ObjectMeta{Name: "calico-v3.32.0"},
				Spec: operatorv1.ImageSetSpec{Images: []operatorv1.Image{{Image: "calico/node", Digest: "sha256:1"}}}}}
		}, nil, preflight.CheckImageSet, v1alpha1.CheckFail, "ImageSet calico-v3.32.0 pins the images of Calico v3.32.0 but lists no "+
			"calico/cni-windows or calico/node-windows"),
		Entry("a pool for LoadBalancer addresses", calicosim.MainCluster, func() []client.Object {
			return []client.Object{&calicov3.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "lb"},
				Spec: calicov3.IPPoolSpec{CIDR: "10.50.0.0/24", AllowedUses: []calicov3.IPPoolAllowedUse{calicov3.IPPoolAllowedUseLoadBalancer}}}}
		}, nil, preflight.CheckLBPools, v1alpha1.CheckFail, "IP pools lb (10.50.0.0/24) serve LoadBalancer addresses"),
	)

	It("refuses the VPP dataplane, whose bgp the Tigera operator never lets go", func() {
		b = driveInline(calicosim.MainCluster())
		inst := b.on.Installation()
		base := inst.DeepCopy()
		vpp := operatorv1.LinuxDataplaneVPP
		inst.Spec.CalicoNetwork.LinuxDataplane = &vpp
		Expect(b.k8s.Patch(ctx, inst, client.MergeFrom(base))).To(Succeed())
		refusedBeforeAnyChange(b, preflight.CheckDataplane, "linuxDataplane is VPP")
	})

	It("refuses host-local IPAM, with which the Tigera operator rejects VXLAN pools", func() {
		b = driveInline(calicosim.MainCluster())
		inst := b.on.Installation()
		base := inst.DeepCopy()
		inst.Spec.CNI.IPAM = &operatorv1.IPAMSpec{Type: operatorv1.IPAMPluginHostLocal}
		Expect(b.k8s.Patch(ctx, inst, client.MergeFrom(base))).To(Succeed())
		refusedBeforeAnyChange(b, preflight.CheckCNI, "spec.cni.ipam.type is HostLocal")
	})

	It("refuses an API server address that fails the TLS check against the cluster CA, and goes on with one that passes", func() {
		b = driveInline(calicosim.MainCluster())
		rootCA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "kube-root-ca.crt"},
			Data: map[string]string{"ca.crt": string(cfg.CAData)}}
		Expect(b.k8s.Create(ctx, rootCA)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(b.k8s.Delete(ctx, rootCA))).To(Succeed()) })
		before := b.calicoStateNow()
		b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.SkipNetworkProbe = true
			wr.Spec.PodNetworkCheck.Disabled = true
		})
		By("refusing kubeadm's controlPlaneEndpoint, which no API server of this cluster answers")
		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonAPIServerAddressUnproven))
		Expect(b.on.WR().Status.Message).To(And(ContainSubstring("the API server address 10.0.0.10:6443 (serviceCIDRs from ServiceCIDR objects; "+
			"API server from kubeadm-config controlPlaneEndpoint) failed the TLS check against the cluster CA"), ContainSubstring("set spec.apiServer")))
		Expect(b.on.WR().Status.Originals).To(BeNil())
		Expect(b.calicoStateNow()).To(Equal(before), "nothing is written before the address is proven")

		By("going on with this cluster's API server, whose certificate the cluster CA signs")
		u, err := url.Parse(cfg.Host)
		Expect(err).NotTo(HaveOccurred())
		host, port, err := net.SplitHostPort(u.Host)
		Expect(err).NotTo(HaveOccurred())
		portNumber, err := strconv.Atoi(port)
		Expect(err).NotTo(HaveOccurred())
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.APIServer = &v1alpha1.APIServerEndpoint{Host: host, Port: int32(portNumber)}
		})
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.Condition(conditions.DirectAPIServerAddress)().Message).To(ContainSubstring("its TLS certificate is verified against the cluster CA"))
		Expect(b.on.ServicesEndpoint().Data).To(HaveKeyWithValue(calico.ServiceHostKey, host))
	})

	It("refuses an Installation rendered by Helm until a person acknowledges it, then goes on", func() {
		b = driveInline(calicosim.MainCluster())
		inst := b.on.Installation()
		base := inst.DeepCopy()
		inst.Annotations = map[string]string{"meta.helm.sh/release-name": "calico", "meta.helm.sh/release-namespace": "tigera-operator"}
		inst.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
		Expect(b.k8s.Patch(ctx, inst, client.MergeFrom(base))).To(Succeed())
		refusedBeforeAnyChange(b, preflight.CheckHelm, "Installation default is rendered by calico (annotation meta.helm.sh/release-name=calico, "+
			"label app.kubernetes.io/managed-by=Helm)", "installation:\n  calicoNetwork:\n    bgp: Disabled")

		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.Preflight.Acknowledge = []v1alpha1.Acknowledgement{v1alpha1.AcknowledgeHelmManagedInstallation}
		})
		reconcileUntil(b, b.on.Check(preflight.CheckHelm), HaveField("Result", v1alpha1.CheckWarn))
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady), "acknowledged, the migration goes on")
	})

	It("says the Tigera operator's own reason while a step waits on it", func() {
		b = awaitingApproval()
		By("losing the DNS Service after the preflight passed")
		Expect(b.k8s.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}})).To(Succeed())
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation, v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint}
		})
		reconcileUntil(b, func() string { return b.on.Condition(conditions.Reconciling)().Message }, And(
			ContainSubstring("(WindowsDataplane): waiting for"),
			ContainSubstring("the Tigera operator reports TigeraStatus calico-windows Degraded: kube-dns service not found")),
			"the wait carries calico-windows' Degraded message")
		Expect(b.on.WR().Status.Message).To(ContainSubstring("kube-dns service not found"))
	})

	It("names an overlay written after the preflight while a step waits for what it overrides", func() {
		b = awaitingApproval()
		bgp := operatorv1.BGPEnabled
		overlay := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: "overlay"},
			Spec: operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: &bgp}}}
		Expect(b.k8s.Create(ctx, overlay)).To(Succeed())
		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation, v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint}
		})
		reconcileUntil(b, func() string { return b.on.Condition(conditions.Reconciling)().Message }, And(
			ContainSubstring("(BGP): waiting for"),
			ContainSubstring("Installation overlay sets spec.calicoNetwork.bgp: Enabled, which wins over Installation default; remove it from the overlay")))

		Expect(b.k8s.Delete(ctx, overlay)).To(Succeed())
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady), "without the overlay the operator renders default's bgp")
	})
})

func noObjects() []client.Object { return nil }

// awaitingApproval drives the main cluster, without the node rounds, to the
// first disruptive step's wait for approval: the preflight has passed.
func awaitingApproval() *inlineBed {
	GinkgoHelper()
	b := driveInline(calicosim.MainCluster())
	b.on.CreateWR(func(wr *v1alpha1.WindowsReadiness) {
		wr.Spec.Preflight.SkipNetworkProbe = true
		wr.Spec.PodNetworkCheck.Disabled = true
		wr.Spec.RequireApproval = true
	})
	reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseAwaitingApproval))
	return b
}

// withoutKubeadmConfig is the main cluster without kubeadm's record of a
// stable API server address.
func withoutKubeadmConfig() calicosim.Cluster {
	cl := calicosim.MainCluster()
	cl.KubeadmConfig = nil
	return cl
}

// twoAPIServers is the kubernetes Service's EndpointSlice of a cluster with
// two API servers.
func twoAPIServers() []client.Object {
	return []client.Object{&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes-members",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.2"}}, {Addresses: []string{"10.0.0.3"}}},
	}}
}

// smallPool is the main cluster with a /24 pool: four /26 blocks.
func smallPool() calicosim.Cluster {
	cl := calicosim.MainCluster()
	cl.Pools[0].CIDR = "172.20.0.0/24"
	return cl
}

// fullPoolBlocks hold every block of smallPool's pool: linux-0 one full and
// one with room, linux-1 two full ones; linux-2 holds none and borrows an
// address from linux-0.
func fullPoolBlocks() []client.Object {
	block := func(cidr, node string, used int, borrower string) client.Object {
		allocations := make([]*int, 64)
		var attrs []calicov3.AllocationAttribute
		unallocated := []int{}
		for i := range allocations {
			if i < used {
				allocations[i] = ptr.To(0)
			} else {
				unallocated = append(unallocated, i)
			}
		}
		owner := node
		if borrower != "" {
			owner = borrower
		}
		attrs = append(attrs, calicov3.AllocationAttribute{HandleID: ptr.To("k8s-pod-network.x"),
			ActiveOwnerAttrs: map[string]string{"node": owner, "namespace": "default", "pod": "web"}})
		return &calicov3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: strings.NewReplacer(".", "-", "/", "-").Replace(cidr)},
			Spec: calicov3.IPAMBlockSpec{CIDR: cidr, Affinity: ptr.To("host:" + node), Allocations: allocations,
				Unallocated: unallocated, Attributes: attrs}}
	}
	return []client.Object{
		block("172.20.0.0/26", "linux-0", 64, ""),
		block("172.20.0.64/26", "linux-0", 10, "linux-2"),
		block("172.20.0.128/26", "linux-1", 64, ""),
		block("172.20.0.192/26", "linux-1", 64, ""),
	}
}
