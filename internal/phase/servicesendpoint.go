package phase

import (
	"context"
	"fmt"
	"maps"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// ServicesEndpoint writes the API server's direct address into
// tigera-operator/kubernetes-services-endpoint: Windows nodes have no
// kube-proxy to reach the kubernetes Service before Calico runs. The Tigera
// operator copies it into calico-node's environment, which rolls calico-node out.
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
	return nil
}

// target is the ConfigMap to reach: present or not, and its two keys.
func (ServicesEndpoint) target(s *Scope, dir v1alpha1.Direction) (bool, map[string]string) {
	if dir == v1alpha1.DirectionRollback {
		o := s.Originals.ServicesEndpoint
		return o.Present, map[string]string{
			calico.ServiceHostKey: o.Data[calico.ServiceHostKey],
			calico.ServicePortKey: o.Data[calico.ServicePortKey],
		}
	}
	return true, map[string]string{calico.ServiceHostKey: s.Targets.Host, calico.ServicePortKey: s.Targets.Port}
}

func (e ServicesEndpoint) Holds(ctx context.Context, s *Scope, dir v1alpha1.Direction) (bool, error) {
	cm, err := calico.GetServicesEndpoint(ctx, s.Client)
	if err != nil {
		return false, err
	}
	present, want := e.target(s, dir)
	if (cm != nil) != present {
		return false, nil
	}
	for k, v := range want {
		if cm != nil && cm.Data[k] != v {
			return false, nil
		}
	}
	return true, nil
}

func (e ServicesEndpoint) Observe(ctx context.Context, s *Scope, dir v1alpha1.Direction) (State, error) {
	if ok, err := e.Holds(ctx, s, dir); err != nil || !ok {
		return notHeld(), err
	}
	present, want := e.target(s, dir)
	ds, err := calico.ReadDaemonSet(ctx, s.Client, calico.NodeDaemonSet)
	if err != nil {
		return State{}, err
	}
	if ds == nil {
		return waiting("DaemonSet calico-system/calico-node to exist"), nil
	}
	if !present {
		// Without the ConfigMap the Tigera operator renders its own address
		// of the API server (the kubernetes Service's, from its pod): no
		// value to wait for, only the rollout and Calico's health.
		want = nil
	}
	for k, v := range want {
		if got, _ := calico.ContainerEnv(ds, calico.NodeContainer, k); got != v {
			return waiting(fmt.Sprintf("the Tigera operator to render calico-node with %s=%q (is %q)", k, v, got)), nil
		}
	}
	if ok, why := calico.RolloutDone(ds); !ok {
		return waiting(why), nil
	}
	return settledAt(ctx, s, calico.StatusCalico)
}

func (e ServicesEndpoint) Change(ctx context.Context, s *Scope, dir v1alpha1.Direction) error {
	cm, err := calico.GetServicesEndpoint(ctx, s.Client)
	if err != nil {
		return err
	}
	present, want := e.target(s, dir)
	if !present {
		if cm == nil {
			return nil
		}
		return calico.DeleteServicesEndpoint(ctx, s.Client, cm)
	}
	return calico.SetServicesEndpoint(ctx, s.Client, cm, want)
}

func (e ServicesEndpoint) Plan(ctx context.Context, s *Scope, dir v1alpha1.Direction) ([]v1alpha1.PlannedChange, error) {
	cm, err := calico.GetServicesEndpoint(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	present, want := e.target(s, dir)
	object := "ConfigMap " + calico.OperatorNamespace + "/" + calico.ServicesEndpointConfigMap
	if cm != nil && !present {
		return []v1alpha1.PlannedChange{{Step: v1alpha1.StepServicesEndpoint, Object: object, Field: "(object)",
			Before: "present", After: Absent + " (deleted)"}}, nil
	}
	var changes []v1alpha1.PlannedChange
	for _, key := range []string{calico.ServiceHostKey, calico.ServicePortKey} {
		var before *string
		if cm != nil {
			if v, ok := cm.Data[key]; ok {
				before = &v
			}
		}
		after := nonEmpty(want[key])
		if !sameValue(before, after) {
			changes = append(changes, v1alpha1.PlannedChange{Step: v1alpha1.StepServicesEndpoint, Object: object,
				Field: "data." + key, Before: show(before), After: show(after)})
		}
	}
	return changes, nil
}
