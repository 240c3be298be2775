package calicosim

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node is a simulated node.
type Node struct {
	Name, InternalIP string
	Windows          bool
	// WithoutTunnel seeds a Linux node without the VXLAN tunnel address
	// Felix writes (with WithholdTunnel, one whose calico-node is stuck).
	WithoutTunnel bool
}

// Cluster describes what Seed creates.
type Cluster struct {
	Nodes []Node
	// Pools is the Installation's spec.calicoNetwork.ipPools. Empty seeds the operator's own default pool
	// (default-ipv4-ippool, 192.168.0.0/16), as it would have written it on first install.
	Pools []operatorv1.IPPool
	// BGP is spec.calicoNetwork.bgp; "" leaves the field out of the user's spec (the operator defaults it to
	// Enabled).
	BGP operatorv1.BGPOption
	// StrictAffinity nil means no IPAMConfiguration "default"; otherwise it is created with this value and
	// autoAllocateBlocks true.
	StrictAffinity *bool
	// ServicesEndpoint nil means no ConfigMap tigera-operator/kubernetes-services-endpoint; otherwise its data.
	ServicesEndpoint map[string]string
	// ServiceCIDRs is the Installation's spec.serviceCIDRs (nil leaves the field out).
	ServiceCIDRs []string
	// KubeadmConfig nil means no kube-system/kubeadm-config ConfigMap.
	KubeadmConfig *KubeadmConfig
	// Provider is the Installation's spec.kubernetesProvider; Seed creates the cluster DNS Service under the name
	// the operator looks up for it.
	Provider operatorv1.Provider
	// WithoutDNSService seeds no cluster DNS Service, as on a cluster whose DNS runs under another name.
	WithoutDNSService bool
	// Overlay, when set, is the spec of Installation "overlay", created after "default".
	Overlay *operatorv1.InstallationSpec
	// Installation, when set, is the user's Installation spec as written, such as one kept in Git; Pools, BGP
	// and ServiceCIDRs are then ignored.
	Installation *operatorv1.InstallationSpec
	// AsWritten seeds the Installation spec exactly as a user wrote it, without the defaults the operator adds
	// on first sight: a running simulator then writes them (two more generations) right after Seed. By default
	// the spec already carries them, as in any cluster the operator has run in, so that the seeded cluster is at
	// rest from the start.
	AsWritten bool
}

// KubeadmConfig is what Seed writes into kube-system/kubeadm-config.
type KubeadmConfig struct {
	ControlPlaneEndpoint string // host:port
	ServiceSubnet        string
}

// MainCluster is the usual starting point: three Linux nodes, one VXLANCrossSubnet pool, BGP on,
// strictAffinity false, no services endpoint, no serviceCIDRs, and a kubeadm-config.
func MainCluster() Cluster {
	return Cluster{
		Nodes: []Node{
			{Name: "linux-0", InternalIP: "10.0.0.11"},
			{Name: "linux-1", InternalIP: "10.0.0.12"},
			{Name: "linux-2", InternalIP: "10.0.0.13"},
		},
		Pools: []operatorv1.IPPool{{
			Name:          defaultPoolName,
			CIDR:          "172.20.0.0/16",
			Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet,
			BlockSize:     ptrTo(int32(defaultV4BlockSize)),
			NATOutgoing:   operatorv1.NATOutgoingEnabled,
		}},
		BGP:            operatorv1.BGPEnabled,
		StrictAffinity: ptrTo(false),
		KubeadmConfig:  &KubeadmConfig{ControlPlaneEndpoint: "10.0.0.10:6443", ServiceSubnet: "10.96.0.0/12"},
	}
}

// kubeDNSClusterIP is kubeadm's usual DNS address; Seed uses it when the API server's service range holds it.
const kubeDNSClusterIP = "10.96.0.10"

// Seed creates the cluster as the Tigera operator would have left it, healthy and fully rolled out: nodes,
// kube-dns, the ConfigMaps and IPAM configuration of cl, FelixConfiguration default with its VXLAN defaults, the IPPools, DaemonSet calico-node with a finished
// rollout, TigeraStatus calico, ippools and apiserver Available at generation 1, and last the Installation
// "default" (generation 1) with the user's spec plus the operator's defaults (see Cluster.AsWritten) and
// status.computed. A running simulator finds nothing to change. Objects the simulator also writes are created
// before the Installation, so that a running simulator finds them in place.
func Seed(ctx context.Context, c client.Client, cl Cluster) error {
	if err := seedBase(ctx, c, cl); err != nil {
		return err
	}
	// What the operator made of the spec on an earlier run: pools and calico-node follow the defaulted spec.
	spec := InstallationSpec(cl)
	defaulted := Defaulted(spec)
	if err := seedRendered(ctx, c, cl, defaulted); err != nil {
		return err
	}
	return seedInstallation(ctx, c, cl, spec, defaulted)
}

// seedBase creates what the cluster holds besides what the operator renders from the Installation: namespaces,
// nodes, kube-dns, the ConfigMaps, the IPAM configuration and FelixConfiguration default.
func seedBase(ctx context.Context, c client.Client, cl Cluster) error {
	for _, ns := range []string{calicoNamespace, operatorNamespace, kubeSystem} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	vxlan := seededVXLANPool(cl.Pools)
	for i, n := range cl.Nodes {
		if err := createNode(ctx, c, n, tunnelFor(vxlan, n, i)); err != nil {
			return err
		}
	}
	if !cl.WithoutDNSService {
		if err := createDNSService(ctx, c, dnsService(cl.Provider)); err != nil {
			return err
		}
	}
	if k := cl.KubeadmConfig; k != nil {
		if err := create(ctx, c, KubeadmConfigMap(k, cl.Pools)); err != nil {
			return err
		}
	}
	if cl.StrictAffinity != nil {
		ipam := &calicov3.IPAMConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ipamConfigName},
			Spec:       calicov3.IPAMConfigurationSpec{StrictAffinity: *cl.StrictAffinity, AutoAllocateBlocks: true},
		}
		if err := create(ctx, c, ipam); err != nil {
			return err
		}
	}
	if cl.ServicesEndpoint != nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: servicesEndpointCM},
			Data:       cl.ServicesEndpoint,
		}
		if err := create(ctx, c, cm); err != nil {
			return err
		}
	}

	// The core controller's FelixConfiguration defaults, from an earlier run.
	felix := &calicov3.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: felixConfigName},
		Spec: calicov3.FelixConfigurationSpec{VXLANVNI: ptrTo(defaultVXLANVNI), VXLANPort: ptrTo(defaultVXLANPort)}}
	return create(ctx, c, felix)
}

// Defaulted is the Installation spec the Tigera operator makes of spec, as a user wrote it, in a cluster
// without IPPools: the core controller's defaults, the IP pool controller's (which then creates the pools),
// and the core controller's again once the pools exist (IPv4 node address autodetection). test/e2e holds
// the Tigera operator to it.
func Defaulted(spec *operatorv1.InstallationSpec) *operatorv1.InstallationSpec {
	defaulted := spec.DeepCopy()
	fillCoreDefaults(defaulted, nil)
	fillPoolDefaults(defaulted, nil)
	var pools []calicov3.IPPool
	for _, p := range defaulted.CalicoNetwork.IPPools {
		pools = append(pools, *toIPPool(p))
	}
	fillCoreDefaults(defaulted, pools)
	return defaulted
}

// seedRendered creates what the operator renders from the defaulted spec (see Defaulted): the IPPools,
// calico-node rolled out and the TigeraStatuses.
func seedRendered(ctx context.Context, c client.Client, cl Cluster, defaulted *operatorv1.InstallationSpec) error {
	for _, p := range defaulted.CalicoNetwork.IPPools {
		if err := create(ctx, c, toIPPool(p)); err != nil {
			return err
		}
	}

	var cm *corev1.ConfigMap
	if cl.ServicesEndpoint != nil {
		cm = &corev1.ConfigMap{Data: cl.ServicesEndpoint}
	}
	rendered, err := podEnvironment(ctx, c, cm)
	if err != nil {
		return err
	}
	ds := renderCalicoNode(defaulted, rendered)
	metav1.SetMetaDataAnnotation(&ds.ObjectMeta, seededAnnotation, "running")
	if err := create(ctx, c, ds); err != nil {
		return err
	}
	if err := finishRollout(ctx, c, ds, cl.Nodes); err != nil {
		return err
	}

	const generation = 1 // of the Installation about to be created
	for name, gen := range map[string]int64{StatusCalico: generation, StatusIPPools: generation, StatusAPIServer: 0} {
		if err := createAvailableStatus(ctx, c, name, gen); err != nil {
			return err
		}
	}
	return nil
}

// seedInstallation creates the Installation, as the user wrote it (cl.AsWritten) or defaulted, with its
// status.computed, and the overlay.
func seedInstallation(ctx context.Context, c client.Client, cl Cluster, spec, defaulted *operatorv1.InstallationSpec) error {
	if !cl.AsWritten {
		spec = defaulted.DeepCopy()
	}
	inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: installationName}, Spec: *spec}
	if err := create(ctx, c, inst); err != nil {
		return err
	}
	// A running simulator may default the new Installation at the same
	// time: write the status again on the latest version until one sticks.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(inst), inst); err != nil {
			return err
		}
		inst.Status = operatorv1.InstallationStatus{Variant: operatorv1.Calico, CalicoVersion: calicoVersion, Computed: defaulted}
		return c.Status().Update(ctx, inst)
	})
	if err != nil {
		return fmt.Errorf("writing Installation status: %w", err)
	}
	if cl.Overlay != nil {
		overlay := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: overlayName}, Spec: *cl.Overlay.DeepCopy()}
		if err := create(ctx, c, overlay); err != nil {
			return err
		}
	}
	return nil
}

// InstallationSpec is the spec a user would have applied: variant, CNI type and the network settings of cl
// (or cl.Installation).
func InstallationSpec(cl Cluster) *operatorv1.InstallationSpec {
	if cl.Installation != nil {
		return cl.Installation.DeepCopy()
	}
	pools := append([]operatorv1.IPPool(nil), cl.Pools...)
	if len(pools) == 0 {
		pools = []operatorv1.IPPool{{Name: defaultPoolName, CIDR: defaultPoolCIDR}}
	}
	spec := &operatorv1.InstallationSpec{
		Variant:       operatorv1.Calico,
		CNI:           &operatorv1.CNISpec{Type: operatorv1.PluginCalico},
		CalicoNetwork: &operatorv1.CalicoNetworkSpec{IPPools: pools},
		ServiceCIDRs:  cl.ServiceCIDRs,
	}
	if cl.BGP != "" {
		spec.CalicoNetwork.BGP = ptrTo(cl.BGP)
	}
	spec.KubernetesProvider = cl.Provider
	return spec
}

// seededVXLANPool is the first IPv4 pool with VXLAN on, nil when none: Felix
// has given every Linux node a tunnel address from it before winready comes.
func seededVXLANPool(pools []operatorv1.IPPool) *netip.Prefix {
	for _, p := range pools {
		prefix, err := netip.ParsePrefix(p.CIDR)
		if err == nil && prefix.Addr().Is4() && (p.Encapsulation == operatorv1.EncapsulationVXLAN ||
			p.Encapsulation == operatorv1.EncapsulationVXLANCrossSubnet) {
			return &prefix
		}
	}
	return nil
}

// tunnelFor is the tunnel address annotation a seeded node carries.
func tunnelFor(vxlan *netip.Prefix, n Node, i int) map[string]string {
	if vxlan == nil || n.Windows || n.WithoutTunnel {
		return nil
	}
	return map[string]string{TunnelAnnotation: tunnelAddress(*vxlan, i)}
}

func createNode(ctx context.Context, c client.Client, n Node, annotations map[string]string) error {
	os := "linux"
	if n.Windows {
		os = "windows"
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Annotations: annotations, Labels: map[string]string{
			osLabel: os, hostnameLabel: hostname(n.Name), "kubernetes.io/arch": "amd64",
		}},
	}
	if err := create(ctx, c, node); err != nil {
		return err
	}
	// A patch, not an update: the simulated Felix may annotate the new Node
	// (its tunnel address) between the create and this write.
	base := node.DeepCopy()
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: n.InternalIP},
		{Type: corev1.NodeHostName, Address: n.Name},
	}
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if err := c.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("writing status of Node %s: %w", n.Name, err)
	}
	return nil
}

// hostname is the kubelet's hostname label of a node: its name, or for a name
// longer than a label value (a fully qualified one, up to 253 characters) its
// first DNS label, as a kubelet whose node name is its FQDN writes it.
func hostname(node string) string {
	if len(node) <= 63 {
		return node
	}
	first, _, _ := strings.Cut(node, ".")
	return first[:min(len(first), 63)]
}

// createDNSService creates the cluster DNS Service at kubeadm's address when the API server's service range holds
// it, and lets the API server pick an address otherwise (envtest's default range is 10.0.0.0/24).
func createDNSService(ctx context.Context, c client.Client, key types.NamespacedName) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", key.Namespace, err)
	}
	svc := func(ip string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{appLabel: kubeDNSName}},
			Spec: corev1.ServiceSpec{
				ClusterIP: ip,
				Selector:  map[string]string{appLabel: kubeDNSName},
				Ports: []corev1.ServicePort{
					{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
					{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				},
			},
		}
	}
	err := c.Create(ctx, svc(kubeDNSClusterIP))
	if apierrors.IsInvalid(err) {
		err = c.Create(ctx, svc(""))
	}
	if err != nil {
		return fmt.Errorf("creating Service %s: %w", key, err)
	}
	return nil
}

// KubeadmConfigMap is kube-system/kubeadm-config as kubeadm writes it.
func KubeadmConfigMap(k *KubeadmConfig, pools []operatorv1.IPPool) *corev1.ConfigMap {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n")
	fmt.Fprintf(&b, "controlPlaneEndpoint: %s\nkubernetesVersion: v1.37.2\nnetworking:\n  dnsDomain: cluster.local\n", k.ControlPlaneEndpoint)
	// kubeadm lists one pod subnet per family, comma-separated in dual stack.
	var subnets []string
	seen := map[bool]bool{}
	for _, p := range pools {
		if v4 := isIPv4(p.CIDR); !seen[v4] {
			seen[v4] = true
			subnets = append(subnets, p.CIDR)
		}
	}
	if len(subnets) > 0 {
		fmt.Fprintf(&b, "  podSubnet: %s\n", strings.Join(subnets, ","))
	}
	fmt.Fprintf(&b, "  serviceSubnet: %s\n", k.ServiceSubnet)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: kubeSystem, Name: kubeadmConfigName},
		Data:       map[string]string{"ClusterConfiguration": b.String()},
	}
}

// finishRollout writes the status of a DaemonSet whose pods run on every selected node.
func finishRollout(ctx context.Context, c client.Client, ds *appsv1.DaemonSet, nodes []Node) error {
	selector := labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)
	var n int32
	for _, node := range nodes {
		os := "linux"
		if node.Windows {
			os = "windows"
		}
		if selector.Matches(labels.Set{osLabel: os, hostnameLabel: hostname(node.Name)}) {
			n++
		}
	}
	// A running simulator may write the status of the new DaemonSet at the
	// same time: write it again on the latest version until one sticks.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ds), ds); err != nil {
			return err
		}
		ds.Status = appsv1.DaemonSetStatus{
			ObservedGeneration:     ds.Generation,
			DesiredNumberScheduled: n,
			CurrentNumberScheduled: n,
			UpdatedNumberScheduled: n,
			NumberReady:            n,
			NumberAvailable:        n,
		}
		return c.Status().Update(ctx, ds)
	})
	if err != nil {
		return fmt.Errorf("writing status of DaemonSet %s: %w", ds.Name, err)
	}
	return nil
}

func createAvailableStatus(ctx context.Context, c client.Client, name string, generation int64) error {
	ts := &operatorv1.TigeraStatus{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := create(ctx, c, ts); err != nil {
		return err
	}
	now := metav1.NewTime(time.Now())
	cond := func(t operatorv1.StatusConditionType, s operatorv1.ConditionStatus) operatorv1.TigeraStatusCondition {
		return operatorv1.TigeraStatusCondition{
			Type: t, Status: s, Reason: string(operatorv1.AllObjectsAvailable), Message: allObjectsAvailableMsg,
			LastTransitionTime: now, ObservedGeneration: generation,
		}
	}
	ts.Status.Conditions = []operatorv1.TigeraStatusCondition{
		cond(operatorv1.ComponentAvailable, operatorv1.ConditionTrue),
		cond(operatorv1.ComponentProgressing, operatorv1.ConditionFalse),
		cond(operatorv1.ComponentDegraded, operatorv1.ConditionFalse),
	}
	if err := c.Status().Update(ctx, ts); err != nil {
		return fmt.Errorf("writing TigeraStatus %s: %w", name, err)
	}
	return nil
}

func create(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// MainClusterOf is MainCluster with n Linux nodes, linux-0 to linux-(n-1),
// numbered from 10.0.0.11 upwards.
func MainClusterOf(n int) Cluster {
	cl := MainCluster()
	cl.Nodes = make([]Node, n)
	for i := range cl.Nodes {
		ip := 10<<24 | 11 + i
		cl.Nodes[i] = Node{Name: fmt.Sprintf("linux-%d", i),
			InternalIP: fmt.Sprintf("%d.%d.%d.%d", ip>>24&0xff, ip>>16&0xff, ip>>8&0xff, ip&0xff)}
	}
	return cl
}
