package phase

import (
	"context"
	"fmt"

	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// BGP turns BGP off: Windows nodes route only through VXLAN, and the Tigera
// operator then runs calico-node with the VXLAN backend instead of BIRD,
// which rolls calico-node out node by node.
type BGP struct{}

func (BGP) Name() v1alpha1.StepName { return v1alpha1.StepBGP }

func (BGP) Record(_ context.Context, s *Scope, o *v1alpha1.Originals) error {
	o.BGP = original(calico.BGP(s.Installation))
	return nil
}

func (BGP) target(s *Scope, dir v1alpha1.Direction) *string {
	if dir == v1alpha1.DirectionRollback {
		return value(s.Originals.BGP)
	}
	disabled := string(operatorv1.BGPDisabled)
	return &disabled
}

func (b BGP) Holds(_ context.Context, s *Scope, dir v1alpha1.Direction) (bool, error) {
	return sameValue(calico.BGP(s.Installation), b.target(s, dir)), nil
}

func (b BGP) Observe(ctx context.Context, s *Scope, dir v1alpha1.Direction) (State, error) {
	want := b.target(s, dir)
	if ok, _ := b.Holds(ctx, s, dir); !ok {
		return notHeld(), nil
	}
	ds, err := calico.ReadDaemonSet(ctx, s.Client, calico.NodeDaemonSet)
	if err != nil {
		return State{}, err
	}
	if ds == nil {
		return waiting("DaemonSet calico-system/calico-node to exist"), nil
	}
	backend, _ := calico.ContainerEnv(ds, calico.NodeContainer, calico.NetworkingBackendEnv)
	if wantVXLAN := calico.Deref(want) == string(operatorv1.BGPDisabled); (backend == calico.BackendVXLAN) != wantVXLAN {
		return waiting(fmt.Sprintf("the Tigera operator to render calico-node with %s=%s (is %q)",
			calico.NetworkingBackendEnv, backendFor(wantVXLAN), backend)), nil
	}
	if ok, why := calico.RolloutDone(ds); !ok {
		return waiting(why), nil
	}
	return settledAt(ctx, s, calico.StatusCalico)
}

func (b BGP) Change(ctx context.Context, s *Scope, dir v1alpha1.Direction) error {
	p := &calico.Patch{}
	calico.EnsureCalicoNetwork(p, s.Installation)
	setOrUnset(p, calico.PathBGP, calico.BGP(s.Installation), b.target(s, dir))
	return p.Apply(ctx, s.Client, s.Installation)
}

func backendFor(vxlan bool) string {
	if vxlan {
		return calico.BackendVXLAN
	}
	return "bird"
}

// original records a scalar field, absent included.
func original(v *string) v1alpha1.OriginalValue {
	if v == nil {
		return v1alpha1.OriginalValue{}
	}
	return v1alpha1.OriginalValue{Present: true, Value: *v}
}

// value is the field an OriginalValue describes; nil when it was absent.
func value(o v1alpha1.OriginalValue) *string {
	if !o.Present {
		return nil
	}
	v := o.Value
	return &v
}

func sameValue(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// setOrUnset adds to p the change of the field at path from current to want.
func setOrUnset(p *calico.Patch, path string, current, want *string) {
	if sameValue(current, want) {
		return
	}
	var old any
	if current != nil {
		old = *current
	}
	if want == nil {
		p.Unset(path, old)
		return
	}
	p.Set(path, old, *want)
}

func (b BGP) Plan(_ context.Context, s *Scope, dir v1alpha1.Direction) ([]v1alpha1.PlannedChange, error) {
	return fieldChange(v1alpha1.StepBGP, "spec.calicoNetwork.bgp", calico.BGP(s.Installation), b.target(s, dir)), nil
}
