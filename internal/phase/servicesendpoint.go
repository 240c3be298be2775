package phase

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

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

func (ServicesEndpoint) Name() v1alpha1.StepName { return v1alpha1.StepServicesEndpoint }

func (ServicesEndpoint) Record(ctx context.Context, s *Scope, o *v1alpha1.Originals) error {
	cm, err := calico.GetServicesEndpoint(ctx, s.Client)
	if err != nil {
		return err
	}
	o.ServicesEndpoint = v1alpha1.OriginalConfigMap{Present: cm != nil}
	if cm != nil {
		o.ServicesEndpoint.Data = maps.Clone(cm.Data)
	}
	ds, err := calico.ReadDaemonSet(ctx, s.Client, calico.NodeDaemonSet)
	if err != nil {
		return err
	}
	if ds != nil {
		env := nodeEnv(ds)
		o.ServicesEndpoint.NodeEnv = &env
	}
	return nil
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
	// present and data are the ConfigMap to reach.
	present bool
	data    map[string]string
	// env is what calico-node must run with; nil when the operator's own
	// address is not known (records made before NodeEnv existed).
	env *v1alpha1.ServiceEndpointEnv
	// handover is true while a rollback holds the ConfigMap at the values
	// calico-node had before, on its way to deleting it.
	handover bool
}

// target is the next ConfigMap state toward direction dir, given what the
// cluster shows now (cm and ds may be nil).
func (ServicesEndpoint) target(s *Scope, dir v1alpha1.Direction, cm *corev1.ConfigMap, ds *appsv1.DaemonSet) endpointTarget {
	if dir != v1alpha1.DirectionRollback {
		data := map[string]string{calico.ServiceHostKey: s.Targets.Host, calico.ServicePortKey: s.Targets.Port}
		return endpointTarget{present: true, data: data, env: &v1alpha1.ServiceEndpointEnv{Host: s.Targets.Host, Port: s.Targets.Port}}
	}
	o := s.Originals.ServicesEndpoint
	if o.Present {
		data := map[string]string{calico.ServiceHostKey: o.Data[calico.ServiceHostKey], calico.ServicePortKey: o.Data[calico.ServicePortKey]}
		return endpointTarget{present: true, data: data, env: o.NodeEnv}
	}
	if o.NodeEnv == nil {
		return endpointTarget{}
	}
	// The ConfigMap did not exist: hand the operator the old address first.
	handover := endpointTarget{present: true, handover: true, env: o.NodeEnv,
		data: map[string]string{calico.ServiceHostKey: o.NodeEnv.Host, calico.ServicePortKey: o.NodeEnv.Port}}
	if ds == nil || nodeEnv(ds) != *o.NodeEnv {
		return handover
	}
	if done, _ := calico.RolloutDone(ds); cm != nil && (!done || !sameData(cm, handover.data)) {
		return handover
	}
	return endpointTarget{env: o.NodeEnv}
}

// sameData reports whether the ConfigMap holds exactly want for its two keys
// ("" meaning absent).
func sameData(cm *corev1.ConfigMap, want map[string]string) bool {
	for k, v := range want {
		if cm.Data[k] != v {
			return false
		}
	}
	return true
}

// read reads the ConfigMap and calico-node.
func (ServicesEndpoint) read(ctx context.Context, s *Scope) (*corev1.ConfigMap, *appsv1.DaemonSet, error) {
	cm, err := calico.GetServicesEndpoint(ctx, s.Client)
	if err != nil {
		return nil, nil, err
	}
	ds, err := calico.ReadDaemonSet(ctx, s.Client, calico.NodeDaemonSet)
	return cm, ds, err
}

func holds(cm *corev1.ConfigMap, t endpointTarget) bool {
	if (cm != nil) != t.present {
		return false
	}
	return cm == nil || sameData(cm, t.data)
}

func (e ServicesEndpoint) Holds(ctx context.Context, s *Scope, dir v1alpha1.Direction) (bool, error) {
	cm, ds, err := e.read(ctx, s)
	if err != nil {
		return false, err
	}
	t := e.target(s, dir, cm, ds)
	if t.handover {
		// Half way: the step is not where it is going.
		return false, nil
	}
	return holds(cm, t), nil
}

func (e ServicesEndpoint) Observe(ctx context.Context, s *Scope, dir v1alpha1.Direction) (State, error) {
	cm, ds, err := e.read(ctx, s)
	if err != nil {
		return State{}, err
	}
	t := e.target(s, dir, cm, ds)
	if !holds(cm, t) {
		return notHeld(), nil
	}
	if ds == nil {
		return waiting("DaemonSet calico-system/calico-node to exist"), nil
	}
	if t.env != nil {
		if got := nodeEnv(ds); got != *t.env {
			why := fmt.Sprintf("the Tigera operator to render calico-node with %s=%q %s=%q (is %q %q)",
				calico.ServiceHostKey, t.env.Host, calico.ServicePortKey, t.env.Port, got.Host, got.Port)
			return waiting(why), nil
		}
	}
	if ok, why := calico.RolloutDone(ds); !ok {
		return waiting(why), nil
	}
	return settledAt(ctx, s, calico.StatusCalico)
}

func (e ServicesEndpoint) Change(ctx context.Context, s *Scope, dir v1alpha1.Direction) error {
	cm, ds, err := e.read(ctx, s)
	if err != nil {
		return err
	}
	t := e.target(s, dir, cm, ds)
	if holds(cm, t) {
		return nil
	}
	if !t.present {
		return calico.DeleteServicesEndpoint(ctx, s.Client, cm)
	}
	return calico.SetServicesEndpoint(ctx, s.Client, cm, t.data)
}

func (e ServicesEndpoint) Plan(ctx context.Context, s *Scope, dir v1alpha1.Direction) ([]v1alpha1.PlannedChange, error) {
	cm, ds, err := e.read(ctx, s)
	if err != nil {
		return nil, err
	}
	t := e.target(s, dir, cm, ds)
	object := "ConfigMap " + calico.OperatorNamespace + "/" + calico.ServicesEndpointConfigMap
	var changes []v1alpha1.PlannedChange
	for _, key := range []string{calico.ServiceHostKey, calico.ServicePortKey} {
		var before *string
		if cm != nil {
			if v, ok := cm.Data[key]; ok {
				before = &v
			}
		}
		after := nonEmpty(t.data[key])
		if !sameValue(before, after) {
			changes = append(changes, v1alpha1.PlannedChange{Step: v1alpha1.StepServicesEndpoint, Object: object,
				Field: "data." + key, Before: show(before), After: show(after)})
		}
	}
	if cm != nil && !t.present {
		return []v1alpha1.PlannedChange{{Step: v1alpha1.StepServicesEndpoint, Object: object, Field: "(object)",
			Before: "present", After: Absent + " (deleted)"}}, nil
	}
	if t.handover {
		changes = append(changes, v1alpha1.PlannedChange{Step: v1alpha1.StepServicesEndpoint, Object: object, Field: "(object)",
			Before: "present", After: Absent + " (deleted once calico-node runs with the address it had before)"})
	}
	return changes, nil
}
