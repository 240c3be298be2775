package phase

import (
	"context"
	"fmt"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// Encapsulation turns every IPv4 pool of the Installation from
// VXLANCrossSubnet to VXLAN, because Windows nodes only route pod traffic
// through VXLAN. The Installation is the source of truth: the Tigera operator
// reverts direct edits of the IPPools it writes.
type Encapsulation struct{}

func (Encapsulation) Name() v1alpha1.StepName { return v1alpha1.StepEncapsulation }

func (Encapsulation) Record(_ context.Context, s *Scope, o *v1alpha1.Originals) error {
	o.Pools = nil
	for _, p := range calico.IPPools(s.Installation) {
		o.Pools = append(o.Pools, v1alpha1.OriginalPool{Name: p.Name, CIDR: p.CIDR, Encapsulation: string(p.Encapsulation)})
	}
	return nil
}

// poolChange is one pool whose encapsulation differs from the target.
type poolChange struct {
	index    int
	pool     operatorv1.IPPool
	target   operatorv1.EncapsulationType
	original operatorv1.EncapsulationType
}

// plan lists the pools whose encapsulation is not the target yet.
func (Encapsulation) plan(s *Scope, dir v1alpha1.Direction) []poolChange {
	var changes []poolChange
	for i, p := range calico.IPPools(s.Installation) {
		target, ok := targetEncapsulation(s, dir, p)
		if ok && p.Encapsulation != target {
			changes = append(changes, poolChange{index: i, pool: p, target: target, original: p.Encapsulation})
		}
	}
	return changes
}

func targetEncapsulation(s *Scope, dir v1alpha1.Direction, p operatorv1.IPPool) (operatorv1.EncapsulationType, bool) {
	if dir == v1alpha1.DirectionRollback {
		for _, o := range s.Originals.Pools {
			// A pool replaced by another with the same name is not ours to restore.
			if o.Name == p.Name && o.CIDR == p.CIDR {
				return operatorv1.EncapsulationType(o.Encapsulation), true
			}
		}
		return "", false
	}
	if calico.IsIPv4(p.CIDR) && p.Encapsulation == operatorv1.EncapsulationVXLANCrossSubnet {
		return operatorv1.EncapsulationVXLAN, true
	}
	return p.Encapsulation, true
}

func (e Encapsulation) Holds(_ context.Context, s *Scope, dir v1alpha1.Direction) (bool, error) {
	return len(e.plan(s, dir)) == 0, nil
}

func (e Encapsulation) Observe(ctx context.Context, s *Scope, dir v1alpha1.Direction) (State, error) {
	if ok, _ := e.Holds(ctx, s, dir); !ok {
		return notHeld(), nil
	}
	for _, p := range calico.IPPools(s.Installation) {
		if !calico.IsIPv4(p.CIDR) {
			// winready never changes IPv6 pools, so it never waits on them.
			continue
		}
		pool, err := calico.GetIPPool(ctx, s.Reader, p.Name)
		if err != nil {
			return State{}, err
		}
		want := calico.VXLANMode(p.Encapsulation)
		if pool == nil || calico.PoolVXLANMode(pool) != want {
			got := "absent"
			if pool != nil {
				got = string(calico.PoolVXLANMode(pool))
			}
			return waiting(fmt.Sprintf("IPPool %s to get vxlanMode %s (is %s)", p.Name, want, got)), nil
		}
	}
	if dir == v1alpha1.DirectionMigrate {
		if st, err := e.foreignPools(ctx, s); err != nil || !st.Settled {
			return st, err
		}
	}
	return settledAt(ctx, s, calico.StatusIPPools, calico.StatusCalico)
}

// foreignPools waits until every enabled IPv4 workload pool in the cluster,
// including pools the Installation does not describe, uses VXLAN always:
// Windows nodes route only through VXLAN. winready changes pools only through
// the Installation, so a pool outside it has to be moved by a person.
func (Encapsulation) foreignPools(ctx context.Context, s *Scope) (State, error) {
	pools, err := calico.ListIPPools(ctx, s.Reader)
	if err != nil {
		return State{}, err
	}
	for _, pool := range pools {
		if calico.ServesWindowsWorkloads(&pool) && calico.PoolVXLANMode(&pool) != calicov3.VXLANModeAlways {
			return waiting(fmt.Sprintf("IPPool %s (%s, not in the Installation) to get vxlanMode Always: winready "+
				"changes pools only through the Installation; add it to spec.calicoNetwork.ipPools with encapsulation VXLAN, "+
				"or set its vxlanMode: Always and ipipMode: Never", pool.Name, pool.Spec.CIDR)), nil
		}
	}
	return done(), nil
}

func (e Encapsulation) Change(ctx context.Context, s *Scope, dir v1alpha1.Direction) error {
	p := &calico.Patch{}
	for _, c := range e.plan(s, dir) {
		// The index is only trusted together with the CIDR found at it.
		p.Test(calico.PoolPath(c.index, "cidr"), c.pool.CIDR)
		var old any
		if c.original != "" {
			old = string(c.original)
		}
		if c.target == "" {
			p.Unset(calico.PoolPath(c.index, "encapsulation"), old)
		} else {
			p.Set(calico.PoolPath(c.index, "encapsulation"), old, string(c.target))
		}
	}
	return p.Apply(ctx, s.Client, s.Installation)
}

// settledAt waits until each named TigeraStatus is healthy at the current
// Installation generation, which includes every patch made so far.
func settledAt(ctx context.Context, s *Scope, names ...string) (State, error) {
	for _, name := range names {
		h, err := calico.ReadHealth(ctx, s.Client, name)
		if err != nil {
			return State{}, err
		}
		if ok, why := h.SettledAt(s.Installation.Generation); !ok {
			return waiting(why), nil
		}
	}
	return done(), nil
}

func (e Encapsulation) Plan(_ context.Context, s *Scope, dir v1alpha1.Direction) ([]v1alpha1.PlannedChange, error) {
	var changes []v1alpha1.PlannedChange
	for _, c := range e.plan(s, dir) {
		before, after := string(c.original), string(c.target)
		changes = append(changes, v1alpha1.PlannedChange{Step: v1alpha1.StepEncapsulation, Object: installationObject,
			Field:  PoolField(c.pool.Name, "encapsulation"),
			Before: show(nonEmpty(before)), After: show(nonEmpty(after))})
	}
	return changes, nil
}

// PoolField names a field of the Installation pool called name.
func PoolField(name, field string) string {
	return fmt.Sprintf("spec.calicoNetwork.ipPools[name=%s].%s", name, field)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
