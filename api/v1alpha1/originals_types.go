package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OriginalValue is a scalar field as it was before the migration.
type OriginalValue struct {
	// Present is false when the field was absent.
	Present bool `json:"present"`
	// +optional
	Value string `json:"value,omitempty"`
}

// OriginalList is a list field as it was before the migration.
type OriginalList struct {
	// Present is false when the field was absent.
	Present bool `json:"present"`
	// +optional
	Values []string `json:"values,omitempty"`
}

// OriginalIPAMConfig is IPAMConfiguration "default" as it was.
type OriginalIPAMConfig struct {
	// Present is false when the object did not exist; a rollback deletes it.
	Present bool `json:"present"`
	// +optional
	StrictAffinity bool `json:"strictAffinity,omitempty"`
}

// OriginalPool is one Installation IP pool's encapsulation as it was.
type OriginalPool struct {
	Name string `json:"name"`
	CIDR string `json:"cidr"`
	// +optional
	Encapsulation string `json:"encapsulation,omitempty"`
}

// OriginalConfigMap is the services-endpoint ConfigMap as it was.
type OriginalConfigMap struct {
	// Present is false when the ConfigMap did not exist; a rollback deletes it.
	Present bool `json:"present"`
	// +optional
	Data map[string]string `json:"data,omitempty"`
	// NodeEnv is the API server address calico-node ran with before the
	// migration. The Tigera operator keeps the ConfigMap's last values in
	// memory after the ConfigMap is deleted, so a rollback writes these values
	// into the ConfigMap, waits for calico-node to run with them, and only
	// then deletes it. Absent in records made before it existed.
	// +optional
	NodeEnv *ServiceEndpointEnv `json:"nodeEnv,omitempty"`
}

// ServiceEndpointEnv is calico-node's KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT; empty when not set.
type ServiceEndpointEnv struct {
	// +optional
	Host string `json:"host,omitempty"`
	// +optional
	Port string `json:"port,omitempty"`
}

// Originals holds the value of everything the migration changes, recorded
// before its first change so that a rollback can restore it exactly.
type Originals struct {
	RecordedAt metav1.Time        `json:"recordedAt"`
	IPAMConfig OriginalIPAMConfig `json:"ipamConfig"`
	// +listType=map
	// +listMapKey=name
	// +optional
	Pools            []OriginalPool    `json:"pools,omitempty"`
	BGP              OriginalValue     `json:"bgp"`
	ServicesEndpoint OriginalConfigMap `json:"servicesEndpoint"`
	ServiceCIDRs     OriginalList      `json:"serviceCIDRs"`
	WindowsDataplane OriginalValue     `json:"windowsDataplane"`
	// WindowsNodesPresent records whether spec.windowsNodes was set; the Tigera
	// operator defaults it once Windows is on and rejects it once Windows is off.
	WindowsNodesPresent bool `json:"windowsNodesPresent"`
	// NodeMaxUnavailable is calico-node's rolling-update maxUnavailable in the
	// Installation's spec.nodeUpdateStrategy (a count or a percentage), put
	// back after spec.rollout.maxUnavailable sped the rollouts up. Records
	// made before winready knew this field lack it; nothing is sped up then.
	// +optional
	NodeMaxUnavailable *OriginalValue `json:"nodeMaxUnavailable,omitempty"`
	// NodeIgnored is calico-node's unsupported.operator.tigera.io/ignore
	// annotation, which winready sets while the Tigera operator reads a
	// write spanning the Installation and the services-endpoint ConfigMap
	// and removes afterwards. An annotation recorded here is someone else's
	// and is never removed. Records made before winready held calico-node
	// lack it.
	// +optional
	NodeIgnored *OriginalValue `json:"nodeIgnored,omitempty"`
	// Overlay is what Installation "overlay", which the Tigera operator
	// merges over "default", held of the fields the migration changes: a
	// rollback restores default and leaves the overlay alone, so the
	// effective Installation is the original only while the overlay still
	// holds these. Records made before winready read the overlay lack it;
	// they count as recorded without one.
	// +optional
	Overlay *OriginalOverlay `json:"overlay,omitempty"`
}

// OriginalOverlay is what Installation "overlay" held, before the
// migration, of the Installation fields the migration changes; a value set
// there wins over default's.
type OriginalOverlay struct {
	// Present is false when there was no Installation overlay.
	Present bool `json:"present"`
	// BGP is spec.calicoNetwork.bgp.
	// +optional
	BGP OriginalValue `json:"bgp,omitempty"`
	// PoolsPresent says whether spec.calicoNetwork.ipPools was set: the
	// overlay's list then replaces default's whole.
	// +optional
	PoolsPresent bool `json:"poolsPresent,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +optional
	Pools []OriginalPool `json:"pools,omitempty"`
	// ServiceCIDRs is spec.serviceCIDRs.
	// +optional
	ServiceCIDRs OriginalList `json:"serviceCIDRs,omitempty"`
	// WindowsDataplane is spec.calicoNetwork.windowsDataplane.
	// +optional
	WindowsDataplane OriginalValue `json:"windowsDataplane,omitempty"`
	// WindowsNodesPresent says whether spec.windowsNodes was set.
	// +optional
	WindowsNodesPresent bool `json:"windowsNodesPresent,omitempty"`
}
