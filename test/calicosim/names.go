package calicosim

// Names, labels and messages of the objects the simulator reads and writes. The strings are the ones the
// Tigera operator v1.43.0 uses (pkg/render, pkg/controller/installation, pkg/controller/ippool,
// pkg/controller/status), so that code tested against the simulator reads the same words as in a real cluster.
const (
	installationName   = "default"
	overlayName        = "overlay"
	calicoNamespace    = "calico-system"
	operatorNamespace  = "tigera-operator"
	kubeSystem         = "kube-system"
	ipamConfigName     = "default"
	kubeDNSName        = "kube-dns"
	rke2DNSName        = "rke2-coredns-rke2-coredns"
	kubeadmConfigName  = "kubeadm-config"
	nodeDaemonSet      = "calico-node"
	windowsDaemonSet   = "calico-node-windows"
	nodeContainer      = "calico-node"
	servicesEndpointCM = "kubernetes-services-endpoint"

	// Keys of the services-endpoint ConfigMap, copied into the calico-node env under the same names.
	envServiceHost = "KUBERNETES_SERVICE_HOST"
	envServicePort = "KUBERNETES_SERVICE_PORT"

	// Pools the operator writes carry this label; it reverts edits to them and deletes them when they leave the
	// Installation.
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "tigera-operator"

	// A DaemonSet Seed creates carries this annotation: its pods already run
	// on every node, so the simulated DaemonSet controller does not start them
	// again even when it sees the DaemonSet before Seed writes its status.
	seededAnnotation = "calicosim.winready.io/seeded"

	osLabel       = "kubernetes.io/os"
	hostnameLabel = "kubernetes.io/hostname"
	appLabel      = "k8s-app"

	// Felix's default VXLAN VNI, which the core controller writes into FelixConfiguration and the Windows
	// controller copies into calico-node-windows.
	defaultVXLANVNI  = 4096
	defaultVXLANPort = 4789
	felixConfigName  = "default"

	calicoImage        = "quay.io/calico/node:v3.32.0"
	calicoWindowsImage = "quay.io/calico/node-windows:v3.32.0"
	cniWindowsImage    = "quay.io/calico/cni-windows:v3.32.0"
)

// TigeraStatus names.
const (
	StatusCalico        = "calico"
	StatusIPPools       = "ippools"
	StatusAPIServer     = "apiserver"
	StatusCalicoWindows = "calico-windows"
)

// Status manager wording (pkg/controller/status/status.go).
const (
	allObjectsAvailableMsg = "All objects available"
	reasonUnknown          = "Unknown"
)

// Degraded messages, word for word from the operator.
const (
	msgInvalidInstallation   = "Invalid Installation provided"
	msgInvalidComputed       = "Invalid computed config"
	msgWaitingForPools       = "waiting for enabled IP pools to be created"
	msgWaitingForDefaulting  = "Waiting for Installation defaulting to occur"
	msgPoolsAPIUnavailable   = "Unable to modify IP pools while Calico API server is unavailable"
	msgPoolDeleteUnavailable = "Unable to delete IP pools while Calico API server is unavailable"
	msgPoolNotOwned          = "Cannot update an IP pool not owned by the operator"
	msgServicesEndpointRead  = "Error reading services endpoint configmap"
	msgWindowsNodesNil       = "Installation.Spec.WindowsNodes is nil"
	msgStrictAffinity        = "Invalid StrictAffinity, it must be set to 'true' when using Calico IPAM on Windows"
	errStrictAffinity        = "StrictAffinity is false, it must be set to 'true' in the default IPAMConfiguration when using Calico IPAM on Windows"

	errWindowsServicesEndpoint = "services endpoint configmap '" + servicesEndpointCM + "' does not have all required information for Calico Windows daemonset configuration"
	errWindowsServiceCIDRs     = "installation spec.ServiceCIDRs must be provided when using Calico CNI on Windows"
	errWindowsEncapsulation    = "IPv4 IPPool encapsulation %s is not supported by Calico for Windows"
	errIPIPNeedsBGP            = "with BIRD cluster routing mode, IPIP encapsulation requires that BGP is enabled"
	errUnencapsulatedNeedsBGP  = "with BIRD cluster routing mode, unencapsulated IP pools require that BGP is enabled"
	errVPPNeedsBGP             = "VPP requires BGP to be enabled"
	msgInstallationStatusEmpty = "InstallationStatus is empty"
	msgVNIRead                 = "Error reading VXLANVNI from FelixConfiguration"
	errVNIMissing              = "VXLANVNI not specified in FelixConfigurationSpec"
	msgPoolDefaults            = "error filling IP pool defaults"
	errWindowsNodesDisabled    = "installation spec.WindowsNodes is not valid and should not be provided when Calico for Windows is disabled"
	errNodeUpdateStrategy      = "installation spec.NodeUpdateStrategy.type '%v' is not supported"
	// ignoreAnnotation marks an object the operator's component handler leaves alone (utils.IgnoreObject).
	ignoreAnnotation = "unsupported.operator.tigera.io/ignore"
)
