package phase

import (
	"context"
	"fmt"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// BGP turns BGP off: Windows nodes route only through VXLAN, and the Tigera
// operator then runs calico-node with the VXLAN backend instead of BIRD,
// which rolls calico-node out node by node.
type BGP struct{}

// Name implements Step.
func (BGP) Name() v1alpha1.StepName { return v1alpha1.StepBGP }

func (BGP) Read(ctx context.Context, r Readers, c *calico.Cluster) error {
	if err := readNode(ctx, r, c); err != nil {
		return err
	}
	return readHealth(ctx, r, c, calico.StatusCalico)
}

// ReadGate lists the Nodes (their metadata, from the cache) for
// ReadyToChange, once a pass: only a pass about to turn BGP off copies them.
func (BGP) ReadGate(ctx context.Context, r Readers, c *calico.Cluster) error {
	if c.Nodes != nil {
		return nil
	}
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.Cache.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	c.Nodes = nodes.Items
	return nil
}

// Record keeps the Installation's bgp.
func (BGP) Record(c *calico.Cluster, o *v1alpha1.Originals) {
	o.BGP = original(calico.OfString(calico.BGP(c.Installation)))
}

func (BGP) target(in Input) calico.Value {
	if in.rollback() {
		return value(in.Originals.BGP)
	}
	return calico.Of(string(operatorv1.BGPDisabled))
}

// Diff sets the Installation's bgp to Disabled, or back to the original.
func (b BGP) Diff(in Input) []calico.Change {
	return calico.FieldChange(calico.ObjectInstallation, calico.PathBGP,
		calico.OfString(calico.BGP(in.Cluster.Installation)), b.target(in))
}

// Settled waits until calico-node runs with the backend that goes with the
// target (VXLAN without BGP), has rolled out, and TigeraStatus calico is
// healthy at the new generation.
func (b BGP) Settled(in Input) (bool, string) {
	ds := in.Cluster.Node
	if ds == nil {
		return false, "DaemonSet calico-system/calico-node to exist"
	}
	backend, _ := calico.ContainerEnv(ds, calico.NodeContainer, calico.NetworkingBackendEnv)
	if wantVXLAN := b.target(in).V == string(operatorv1.BGPDisabled); (backend == calico.BackendVXLAN) != wantVXLAN {
		return false, fmt.Sprintf("the Tigera operator to render calico-node with %s=%s (is %q)",
			calico.NetworkingBackendEnv, backendFor(wantVXLAN), backend)
	}
	if ok, why := calico.RolloutDone(ds); !ok {
		return false, why
	}
	return in.Cluster.SettledAt(calico.StatusCalico)
}

// maxNamed bounds the node names a message lists.
const maxNamed = 10

// ReadyToChange waits, before BIRD is turned off, until every Linux node has
// a VXLAN tunnel address: a node without one has no route to the others once
// BGP stops, and is stranded.
func (BGP) ReadyToChange(in Input) (bool, string) {
	if in.rollback() {
		return true, ""
	}
	missing := in.Cluster.WithoutTunnel()
	if len(missing) == 0 {
		return true, ""
	}
	named := missing[:min(len(missing), maxNamed)]
	more := ""
	if len(missing) > len(named) {
		more = fmt.Sprintf(" and %d more", len(missing)-len(named))
	}
	return false, fmt.Sprintf("every Linux node to get a VXLAN tunnel address (Node annotation %s) before BGP is turned off, "+
		"or those nodes are stranded; %d have none: %s%s. Check calico-node on them",
		calico.TunnelAnnotation, len(missing), strings.Join(named, ", "), more)
}

func backendFor(vxlan bool) string {
	if vxlan {
		return calico.BackendVXLAN
	}
	return "bird"
}
