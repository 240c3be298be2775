package phase

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// ServicesEndpoint writes the API server's direct address into
// tigera-operator/kubernetes-services-endpoint: Windows nodes have no
// kube-proxy to reach the kubernetes Service before Calico runs. The Tigera
// operator copies it into calico-node's environment, which rolls calico-node out.
//
// The operator keeps the ConfigMap's last values in memory when the ConfigMap
// is deleted (until the operator restarts), so deleting it would leave
// calico-node on the direct address and move it back at some unplanned
// restart. A rollback of a ConfigMap that did not exist therefore goes in two
// moves: it writes the address calico-node had before the migration, waits
// for that rollout, and only then deletes the ConfigMap; the operator's memory
// then holds what its own environment says, and nothing is left to forget.
type ServicesEndpoint struct{}

// Name implements Step.
func (ServicesEndpoint) Name() v1alpha1.StepName { return v1alpha1.StepServicesEndpoint }

func (ServicesEndpoint) Read(ctx context.Context, r Readers, c *calico.Cluster) (err error) {
	if c.ServicesEndpoint, err = calico.GetServicesEndpoint(ctx, r.Cache); err != nil {
		return err
	}
	if err := readNode(ctx, r, c); err != nil {
		return err
	}
	return readHealth(ctx, r, c, calico.StatusCalico)
}

// Record keeps the ConfigMap's data, whether it existed, and the API server
// address calico-node's template carries, which a rollback hands back.
func (ServicesEndpoint) Record(c *calico.Cluster, o *v1alpha1.Originals) {
	cm := c.ServicesEndpoint
	o.ServicesEndpoint = v1alpha1.OriginalConfigMap{Present: cm != nil}
	if cm != nil {
		o.ServicesEndpoint.Data = maps.Clone(cm.Data)
	}
	if c.Node != nil {
		env := nodeEnv(c.Node)
		o.ServicesEndpoint.NodeEnv = &env
	}
}

// nodeEnv is the API server address calico-node's template carries.
func nodeEnv(ds *appsv1.DaemonSet) v1alpha1.ServiceEndpointEnv {
	host, _ := calico.ContainerEnv(ds, calico.NodeContainer, calico.ServiceHostKey)
	port, _ := calico.ContainerEnv(ds, calico.NodeContainer, calico.ServicePortKey)
	return v1alpha1.ServiceEndpointEnv{Host: host, Port: port}
}

// endpointTarget is where the ConfigMap must be now and what calico-node must
// then run with.
type endpointTarget struct {
	// present, host and port are the ConfigMap to reach ("" is absent).
	present    bool
	host, port string
	// env is what calico-node must run with; nil when the operator's own
	// address is not known (records made before NodeEnv existed).
	env *v1alpha1.ServiceEndpointEnv
	// handover is true while a rollback holds the ConfigMap at the values
	// calico-node had before, on its way to deleting it.
	handover bool
}

// target is the next ConfigMap state toward the direction, given what the
// cluster shows now.
func (ServicesEndpoint) target(in Input) endpointTarget {
	if !in.rollback() {
		env := v1alpha1.ServiceEndpointEnv{Host: in.Targets.Host, Port: in.Targets.Port}
		return endpointTarget{present: true, host: env.Host, port: env.Port, env: &env}
	}
	o := in.Originals.ServicesEndpoint
	if o.Present {
		return endpointTarget{present: true, host: o.Data[calico.ServiceHostKey], port: o.Data[calico.ServicePortKey], env: o.NodeEnv}
	}
	if o.NodeEnv == nil {
		return endpointTarget{}
	}
	// The ConfigMap did not exist: hand the operator the old address first.
	handover := endpointTarget{present: true, handover: true, env: o.NodeEnv, host: o.NodeEnv.Host, port: o.NodeEnv.Port}
	cm, ds := in.Cluster.ServicesEndpoint, in.Cluster.Node
	if ds == nil || nodeEnv(ds) != *o.NodeEnv {
		return handover
	}
	if done, _ := calico.RolloutDone(ds); cm != nil &&
		(!done || cm.Data[calico.ServiceHostKey] != handover.host || cm.Data[calico.ServicePortKey] != handover.port) {
		return handover
	}
	return endpointTarget{env: o.NodeEnv}
}

// Diff writes the ConfigMap's host and port for the next target, or deletes
// it; in a rollback's hand-over the deletion is listed for later.
func (e ServicesEndpoint) Diff(in Input) []calico.Change {
	t, cm := e.target(in), in.Cluster.ServicesEndpoint
	if !t.present {
		if cm == nil {
			return nil
		}
		return []calico.Change{{Object: calico.ObjectServicesEndpoint, Old: calico.Of(nil)}}
	}
	var changes []calico.Change
	for _, kv := range [][2]string{{calico.ServiceHostKey, t.host}, {calico.ServicePortKey, t.port}} {
		old := calico.Value{}
		if cm != nil {
			if v, ok := cm.Data[kv[0]]; ok {
				old = calico.Of(v)
			}
		}
		changes = append(changes, calico.FieldChange(calico.ObjectServicesEndpoint, calico.DataPointer(kv[0]), old, nonEmpty(kv[1]))...)
	}
	if t.handover {
		changes = append(changes, calico.Change{Object: calico.ObjectServicesEndpoint, Old: calico.Of(nil),
			Later: "once calico-node runs with the address it had before"})
	}
	return changes
}

func nonEmpty(s string) calico.Value {
	if s == "" {
		return calico.Value{}
	}
	return calico.Of(s)
}

// Settled waits until calico-node runs with the target's address and has
// rolled out, through the hand-over when there is one, and TigeraStatus
// calico is healthy at the new generation.
func (e ServicesEndpoint) Settled(in Input) (bool, string) {
	t, ds := e.target(in), in.Cluster.Node
	if ds == nil {
		return false, "DaemonSet calico-system/calico-node to exist"
	}
	if t.env != nil {
		if got := nodeEnv(ds); got != *t.env {
			return false, fmt.Sprintf("the Tigera operator to render calico-node with %s=%q %s=%q (is %q %q)",
				calico.ServiceHostKey, t.env.Host, calico.ServicePortKey, t.env.Port, got.Host, got.Port)
		}
	}
	if ok, why := calico.RolloutDone(ds); !ok {
		return false, why
	}
	if t.handover {
		return false, "the Tigera operator to take over the address calico-node had before, then the ConfigMap is deleted"
	}
	return in.Cluster.SettledAt(calico.StatusCalico)
}
