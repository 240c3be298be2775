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

// Name implements Step.
func (Encapsulation) Name() v1alpha1.StepName { return v1alpha1.StepEncapsulation }

func (Encapsulation) Read(ctx context.Context, r Readers, c *calico.Cluster) (err error) {
	if c.Pools, err = calico.ListIPPools(ctx, r.API); err != nil {
		return err
	}
	return readHealth(ctx, r, c, calico.StatusIPPools, calico.StatusCalico)
}

// Record keeps each Installation pool's encapsulation, by name and CIDR.
func (Encapsulation) Record(c *calico.Cluster, o *v1alpha1.Originals) {
	o.Pools = nil
	for _, p := range calico.IPPools(c.Installation) {
		o.Pools = append(o.Pools, v1alpha1.OriginalPool{Name: p.Name, CIDR: p.CIDR, Encapsulation: string(p.Encapsulation)})
	}
}

// Diff changes the encapsulation of each Installation pool that differs from
// its target. IPv6 pools keep theirs: winready never changes them.
func (Encapsulation) Diff(in Input) []calico.Change {
	var changes []calico.Change
	for i, p := range calico.IPPools(in.Cluster.Installation) {
		target, ok := targetEncapsulation(in, p)
		if !ok || p.Encapsulation == target {
			continue
		}
		changes = append(changes, calico.Change{Object: calico.ObjectInstallation,
			Pointer: calico.PoolPath(i, "encapsulation"), Pool: &calico.PoolItem{Name: p.Name, CIDR: p.CIDR},
			Old: encapsulation(p.Encapsulation), New: encapsulation(target)})
	}
	return changes
}

func encapsulation(e operatorv1.EncapsulationType) calico.Value {
	if e == "" {
		return calico.Value{}
	}
	return calico.Of(string(e))
}

func targetEncapsulation(in Input, p operatorv1.IPPool) (operatorv1.EncapsulationType, bool) {
	if in.rollback() {
		for _, o := range in.Originals.Pools {
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

// Settled waits until the operator has written every IPv4 pool's vxlanMode
// and, when migrating, until no pool outside the Installation still routes
// IPv4 workloads without VXLAN. It never waits on IPv6 pools.
func (Encapsulation) Settled(in Input) (bool, string) {
	for _, p := range calico.IPPools(in.Cluster.Installation) {
		if !calico.IsIPv4(p.CIDR) {
			continue
		}
		want := calico.VXLANMode(p.Encapsulation)
		if pool := in.Cluster.Pool(p.Name); pool == nil || calico.PoolVXLANMode(pool) != want {
			got := "absent"
			if pool != nil {
				got = string(calico.PoolVXLANMode(pool))
			}
			return false, fmt.Sprintf("IPPool %s to get vxlanMode %s (is %s)", p.Name, want, got)
		}
	}
	if !in.rollback() {
		if ok, why := foreignPoolsSettled(in.Cluster.Pools); !ok {
			return false, why
		}
	}
	if in.Cluster.Computed() {
		// The pools above are the pool controller's work, read live, and
		// status.computed is the core controller's: it validated and rendered
		// this spec with everything available. Waiting for the 5-second status
		// tick to say the same would cost up to 5 s before the next write
		// (docs/concepts.md, what each wait wakes on); a Degraded TigeraStatus
		// still holds the step.
		return in.Cluster.NotDegraded(calico.StatusIPPools, calico.StatusCalico)
	}
	return in.Cluster.SettledAt(calico.StatusIPPools, calico.StatusCalico)
}

// foreignPoolsSettled waits until every enabled IPv4 workload pool in the
// cluster, including pools the Installation does not describe, uses VXLAN
// always: Windows nodes route only through VXLAN. winready changes pools only
// through the Installation, so a pool outside it has to be moved by a person.
func foreignPoolsSettled(pools []calicov3.IPPool) (bool, string) {
	for _, pool := range pools {
		if calico.ServesWindowsWorkloads(&pool) && calico.PoolVXLANMode(&pool) != calicov3.VXLANModeAlways {
			return false, fmt.Sprintf("IPPool %s (%s, not in the Installation) to get vxlanMode Always: winready "+
				"changes pools only through the Installation; add it to spec.calicoNetwork.ipPools with encapsulation VXLAN, "+
				"or set its vxlanMode: Always and ipipMode: Never", pool.Name, pool.Spec.CIDR)
		}
	}
	return true, ""
}
