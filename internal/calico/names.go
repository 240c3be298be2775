// Package calico reads and writes the objects of Calico and the Tigera
// operator on winready's behalf: guarded Installation patches, IPAM
// configuration, IP pools, TigeraStatus health and DaemonSet rollouts.
package calico

// The names of the objects winready reads and writes, and of their keys.
const (
	// InstallationName is the Installation the Tigera operator reconciles.
	InstallationName = "default"

	// OperatorNamespace is where the Tigera operator reads its ConfigMaps.
	OperatorNamespace = "tigera-operator"
	// ServicesEndpointConfigMap tells calico-node how to reach the API server
	// without kube-proxy.
	ServicesEndpointConfigMap = "kubernetes-services-endpoint"
	// ServiceHostKey and ServicePortKey are the ConfigMap's keys.
	ServiceHostKey = "KUBERNETES_SERVICE_HOST"
	ServicePortKey = "KUBERNETES_SERVICE_PORT"

	// SystemNamespace holds the DaemonSets the Tigera operator renders.
	SystemNamespace = "calico-system"
	// NodeDaemonSet and WindowsNodeDaemonSet are calico-node for Linux and Windows.
	NodeDaemonSet        = "calico-node"
	WindowsNodeDaemonSet = "calico-node-windows"
	// NodeContainer is the calico-node container in NodeDaemonSet.
	NodeContainer = "calico-node"
	// NetworkingBackendEnv selects BIRD (BGP) or VXLAN-only networking.
	NetworkingBackendEnv = "CALICO_NETWORKING_BACKEND"
	// BackendVXLAN is the backend calico-node runs once BGP is disabled.
	BackendVXLAN = "vxlan"

	// TigeraStatus names.
	StatusCalico        = "calico"
	StatusIPPools       = "ippools"
	StatusCalicoWindows = "calico-windows"

	// IPAMConfigName is the cluster's IPAM configuration.
	IPAMConfigName = "default"

	// ManagedByLabel marks the IPPools the Tigera operator writes and owns.
	ManagedByLabel    = "app.kubernetes.io/managed-by"
	ManagedByOperator = "tigera-operator"

	// OSLabel and OSWindows identify Windows nodes.
	OSLabel   = "kubernetes.io/os"
	OSWindows = "windows"
)
