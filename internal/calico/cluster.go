package calico

import (
	"fmt"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cluster is what the steps read of the cluster in one reconcile. Each step
// reads the parts it decides from; a nil object is one that does not exist.
type Cluster struct {
	Installation *operatorv1.Installation
	// Overlay is Installation "overlay", which the Tigera operator merges
	// over Installation; nil when there is none.
	Overlay          *operatorv1.Installation
	IPAMConfig       *calicov3.IPAMConfiguration
	ServicesEndpoint *corev1.ConfigMap
	// Node and WindowsNode are the calico-node and calico-node-windows
	// DaemonSets.
	Node        *appsv1.DaemonSet
	WindowsNode *appsv1.DaemonSet
	// Pools are every projectcalico.org/v3 IPPool in the cluster.
	Pools []calicov3.IPPool
	// Nodes are every Node's metadata.
	Nodes []metav1.PartialObjectMetadata
	// Health holds the TigeraStatuses read, by name.
	Health map[string]Health
}

// Pool is the projectcalico.org/v3 IPPool called name, nil when absent.
func (c *Cluster) Pool(name string) *calicov3.IPPool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}

// SettledAt says whether each named TigeraStatus is healthy at the
// Installation's generation, which includes every patch made so far, and
// what it waits for if not.
func (c *Cluster) SettledAt(names ...string) (bool, string) {
	for _, name := range names {
		h, ok := c.Health[name]
		if !ok {
			h = Health{Name: name}
		}
		if ok, why := h.SettledAt(c.Installation.Generation); !ok {
			return false, why
		}
	}
	return true, ""
}

// Computed says whether the Tigera operator has finished a reconcile of the
// Installation's current spec: it writes status.computed, the spec it
// rendered, only at the end of a reconcile that validated, rendered and found
// every component available (core_controller.go), seconds before its 5-second
// status tick sets TigeraStatus calico's observedGeneration. With an overlay
// Installation computed is the merged spec, which never equals the spec.
func (c *Cluster) Computed() bool {
	inst := c.Installation
	return inst != nil && inst.Status.Computed != nil && equality.Semantic.DeepEqual(*inst.Status.Computed, inst.Spec)
}

// NotDegraded says whether none of the named TigeraStatuses is Degraded, and
// which is if one is.
func (c *Cluster) NotDegraded(names ...string) (bool, string) {
	for _, name := range names {
		if h := c.Health[name]; h.Degraded {
			return false, fmt.Sprintf("TigeraStatus %s to recover from Degraded: %s", h.Name, h.Message)
		}
	}
	return true, ""
}

// TunnelAnnotation is where calico-node records a node's VXLAN tunnel
// address on the Kubernetes Node.
const TunnelAnnotation = "projectcalico.org/IPv4VXLANTunnelAddr"

// WithoutTunnel lists the Linux nodes that have no VXLAN tunnel address yet.
func (c *Cluster) WithoutTunnel() []string {
	var names []string
	for _, n := range c.Nodes {
		if n.Labels[OSLabel] != OSWindows && n.Annotations[TunnelAnnotation] == "" {
			names = append(names, n.Name)
		}
	}
	return names
}
