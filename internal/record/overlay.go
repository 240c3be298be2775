package record

import (
	"slices"

	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// Overlay records what Installation "overlay" holds of the Installation
// fields the migration changes, as the Tigera operator merges them
// (calico.MergeOverlay): a field set there wins over default's. An absent
// overlay is recorded as such.
//
// winready never writes the overlay, in either direction: it belongs to
// whoever manages it, often a GitOps tool that would put it back. A rollback
// restores default, and the effective Installation is then the original as
// long as the overlay holds what it held when the originals were recorded;
// where it does not, the rollback names the overlay's field and stops
// (phase.Overridden).
func Overlay(overlay *operatorv1.Installation) *v1alpha1.OriginalOverlay {
	if overlay == nil {
		return &v1alpha1.OriginalOverlay{}
	}
	spec := overlay.Spec
	o := &v1alpha1.OriginalOverlay{Present: true, WindowsNodesPresent: spec.WindowsNodes != nil,
		ServiceCIDRs: v1alpha1.OriginalList{Present: spec.ServiceCIDRs != nil, Values: slices.Clone(spec.ServiceCIDRs)}}
	o.BGP, o.WindowsDataplane = scalar(calico.BGP(overlay)), scalar(calico.WindowsDataplane(overlay))
	if cn := spec.CalicoNetwork; cn != nil {
		o.PoolsPresent = cn.IPPools != nil
		for _, p := range cn.IPPools {
			o.Pools = append(o.Pools, v1alpha1.OriginalPool{Name: p.Name, CIDR: p.CIDR, Encapsulation: string(p.Encapsulation)})
		}
	}
	return o
}

func scalar(v *string) v1alpha1.OriginalValue {
	if v == nil {
		return v1alpha1.OriginalValue{}
	}
	return v1alpha1.OriginalValue{Present: true, Value: *v}
}

// Effective is the originals as the effective Installation held them:
// what the recorded overlay set wins over what default held, as the Tigera
// operator merges them. A record without the overlay (written before
// winready read it) counts as recorded without one: o itself is returned
// then, and when no overlay was recorded.
func Effective(o *v1alpha1.Originals) *v1alpha1.Originals {
	if o == nil || o.Overlay == nil || !o.Overlay.Present {
		return o
	}
	ov := o.Overlay
	out := o.DeepCopy()
	if ov.BGP.Present {
		out.BGP = ov.BGP
	}
	if ov.WindowsDataplane.Present {
		out.WindowsDataplane = ov.WindowsDataplane
	}
	if ov.PoolsPresent {
		out.Pools = slices.Clone(ov.Pools)
	}
	if ov.ServiceCIDRs.Present {
		out.ServiceCIDRs = *ov.ServiceCIDRs.DeepCopy()
	}
	out.WindowsNodesPresent = o.WindowsNodesPresent || ov.WindowsNodesPresent
	return out
}
