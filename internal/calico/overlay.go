package calico

import (
	"context"
	"fmt"
	"reflect"

	operatorv1 "github.com/tigera/operator/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OverlayName is the Installation the Tigera operator merges over "default"
// before it renders (core and Windows controllers; the pool controller
// ignores it).
const OverlayName = "overlay"

// GetOverlay reads Installation "overlay"; nil when the cluster has none.
func GetOverlay(ctx context.Context, r client.Reader) (*operatorv1.Installation, error) {
	inst, err := getOrNil(ctx, r, client.ObjectKey{Name: OverlayName}, &operatorv1.Installation{})
	if err != nil {
		return nil, fmt.Errorf("reading installation overlay: %w", err)
	}
	return inst, nil
}

// Effective is the Installation as the Tigera operator renders it: inst with
// the overlay's spec merged over its own. It returns inst itself when there
// is no overlay.
func Effective(inst, overlay *operatorv1.Installation) *operatorv1.Installation {
	if inst == nil || overlay == nil {
		return inst
	}
	out := inst.DeepCopy()
	out.Spec = MergeOverlay(inst.Spec, overlay.Spec)
	return out
}

// MergeOverlay merges an overlay spec over a spec as the Tigera operator
// v1.43.0 does (pkg/controller/utils/merge.go OverrideInstallationSpec) for
// the fields winready reads or writes: a field the overlay sets (not the
// zero value, so an empty but present list counts) wins; calicoNetwork,
// cni and windowsNodes are merged field by field, everything else is
// replaced whole. Fields winready never reads are left as in spec.
func MergeOverlay(spec, overlay operatorv1.InstallationSpec) operatorv1.InstallationSpec {
	out := *spec.DeepCopy()
	o := overlay.DeepCopy()
	if o.Variant != "" {
		out.Variant = o.Variant
	}
	if o.KubernetesProvider != "" {
		out.KubernetesProvider = o.KubernetesProvider
	}
	switch {
	case o.CNI == nil || reflect.ValueOf(*o.CNI).IsZero():
	case out.CNI == nil:
		out.CNI = o.CNI
	default:
		// mergeCNISpecs: type, ipam, binDir and confDir (and installMode, which
		// this API version lacks).
		if o.CNI.Type != "" {
			out.CNI.Type = o.CNI.Type
		}
		if o.CNI.IPAM != nil {
			out.CNI.IPAM = o.CNI.IPAM
		}
		if o.CNI.BinDir != nil {
			out.CNI.BinDir = o.CNI.BinDir
		}
		if o.CNI.ConfDir != nil {
			out.CNI.ConfDir = o.CNI.ConfDir
		}
	}
	switch {
	case o.CalicoNetwork == nil || reflect.ValueOf(*o.CalicoNetwork).IsZero():
	case out.CalicoNetwork == nil:
		out.CalicoNetwork = o.CalicoNetwork
	default:
		// mergeCalicoNetwork gives every field of CalicoNetworkSpec this rule.
		overrideSetFields(reflect.ValueOf(out.CalicoNetwork).Elem(), reflect.ValueOf(o.CalicoNetwork).Elem())
	}
	switch {
	case o.WindowsNodes == nil || reflect.ValueOf(*o.WindowsNodes).IsZero():
	case out.WindowsNodes == nil:
		out.WindowsNodes = o.WindowsNodes
	default:
		overrideSetFields(reflect.ValueOf(out.WindowsNodes).Elem(), reflect.ValueOf(o.WindowsNodes).Elem())
	}
	if !reflect.ValueOf(o.NodeUpdateStrategy).IsZero() {
		out.NodeUpdateStrategy = o.NodeUpdateStrategy
	}
	if o.ServiceCIDRs != nil {
		out.ServiceCIDRs = o.ServiceCIDRs
	}
	return out
}

// overrideSetFields copies into dst every field of src that is not the zero
// value; both are addressable structs of the same type.
func overrideSetFields(dst, src reflect.Value) {
	for i := range src.NumField() {
		if f := src.Field(i); !f.IsZero() {
			dst.Field(i).Set(f)
		}
	}
}

// OverlayField is a field of the overlay that wins over a value winready
// writes into Installation "default".
type OverlayField struct {
	// Path is the field's path under spec, as in YAML.
	Path string
	// Value is the overlay's value, as it reads in YAML.
	Value string
}

// OverlayConflicts lists the fields of the overlay that would win over what
// winready writes into "default": spec.calicoNetwork.bgp, windowsDataplane
// and ipPools (the whole list), and spec.serviceCIDRs. Any value counts, the
// target one too: the overlay would then also keep it through a rollback.
func OverlayConflicts(overlay *operatorv1.Installation) []OverlayField {
	if overlay == nil {
		return nil
	}
	var out []OverlayField
	if cn := overlay.Spec.CalicoNetwork; cn != nil {
		if cn.BGP != nil {
			out = append(out, OverlayField{"calicoNetwork.bgp", string(*cn.BGP)})
		}
		if cn.WindowsDataplane != nil {
			out = append(out, OverlayField{"calicoNetwork.windowsDataplane", string(*cn.WindowsDataplane)})
		}
		if cn.IPPools != nil {
			var pools []string
			for _, p := range cn.IPPools {
				enc := string(p.Encapsulation)
				if enc == "" {
					enc = "default"
				}
				pools = append(pools, fmt.Sprintf("%s %s encapsulation %s", p.Name, p.CIDR, enc))
			}
			out = append(out, OverlayField{"calicoNetwork.ipPools", fmt.Sprintf("%v", pools)})
		}
	}
	if overlay.Spec.ServiceCIDRs != nil {
		out = append(out, OverlayField{"serviceCIDRs", fmt.Sprintf("%v", overlay.Spec.ServiceCIDRs)})
	}
	return out
}
