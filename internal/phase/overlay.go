package phase

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/record"
)

// Effective is the input as the Tigera operator renders it: Installation
// overlay merged over the Installation, and the originals as the effective
// Installation held them (record.Effective).
func (in Input) Effective() Input {
	c := *in.Cluster
	c.Installation = calico.Effective(c.Installation, c.Overlay)
	in.Cluster = &c
	in.Originals = record.Effective(in.Originals)
	return in
}

// Overridden lists the changes the step would still have to make to the
// effective Installation although Installation default holds its target:
// Installation overlay, written or changed since the originals were
// recorded, keeps the cluster from the step's target (the migration's value,
// or the original in a rollback). None while default itself still needs a
// change: the step makes that first.
//
// winready never writes the overlay: it is someone else's object, and the
// conflict is named for a person to resolve (see record.Overlay).
func Overridden(step Step, in Input) []calico.Change {
	if in.Cluster.Overlay == nil && (in.Originals == nil || in.Originals.Overlay == nil || !in.Originals.Overlay.Present) {
		return nil
	}
	if len(calico.Due(step.Diff(in))) > 0 {
		return nil
	}
	var out []calico.Change
	for _, c := range calico.Due(step.Diff(in.Effective())) {
		if c.Object == calico.ObjectInstallation {
			out = append(out, c)
		}
	}
	return out
}

// OverlayConflict says which fields of Installation overlay cause the
// changes Overridden listed, what the cluster runs instead of the step's
// target, and what a person does: winready never changes the overlay.
// manager, when known, is the field manager that last wrote them.
func OverlayConflict(step v1alpha1.StepName, in Input, changes []calico.Change, manager string) string {
	var paths []string
	for _, c := range changes {
		if p := overlayPath(c.Pointer); !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	var recorded *v1alpha1.OriginalOverlay
	if in.Originals != nil {
		recorded = in.Originals.Overlay
	}
	who := "Installation overlay"
	if manager != "" {
		who = fmt.Sprintf("Installation overlay (field manager %q)", manager)
	}
	sets, fix, restore := overlaySays(in.Cluster.Overlay, recorded, paths)
	target := "as step " + string(step) + " set it in Installation default"
	if in.rollback() {
		target = "as before the migration"
	}
	runs := make([]string, 0, len(changes))
	for _, c := range changes {
		runs = append(runs, fmt.Sprintf("%s %s, not %s", c.Field(), c.Before(), c.After()))
	}
	msg := fmt.Sprintf("%s %s; the Tigera operator merges the overlay over Installation default, so the cluster runs %s %s. "+
		"winready never changes the overlay: ", who, strings.Join(sets, ", "), strings.Join(runs, ", "), target)
	var todo []string
	if len(fix) > 0 {
		patch, _ := json.Marshal(map[string]any{"spec": fix})
		todo = append(todo, fmt.Sprintf("remove what it sets from the overlay where it is managed, e.g. "+
			"kubectl patch installation overlay --type merge -p '%s'", patch))
	}
	if restore {
		todo = append(todo, "put back in the overlay what it held before the migration (status.originals.overlay)")
	}
	msg += strings.Join(todo, "; and ") + "; winready goes on by itself once the overlay no longer overrides it"
	if in.rollback() && recorded == nil && in.Originals != nil {
		msg += ". The originals were recorded by an earlier winready, which did not record the overlay: they count as recorded without one"
	}
	return msg
}

// overlaySays is what the overlay sets, or no longer sets, of each path
// against what it held before the migration; the merge patch that removes
// what it sets; and whether something must be put back in it instead.
func overlaySays(overlay *operatorv1.Installation, recorded *v1alpha1.OriginalOverlay, paths []string) (sets []string, fix map[string]any, restore bool) {
	fix = map[string]any{}
	for _, p := range paths {
		now, set := overlayValue(overlay, p)
		was, held := heldBefore(recorded, p)
		switch {
		case set && held:
			sets = append(sets, fmt.Sprintf("sets spec.%s: %s (it held %s before the migration)", p, now, was))
			restore = true
		case set:
			sets = append(sets, fmt.Sprintf("sets spec.%s: %s", p, now))
			putNull(fix, p)
		default:
			sets = append(sets, fmt.Sprintf("no longer sets spec.%s (it held %s before the migration)", p, was))
			restore = true
		}
	}
	return sets, fix, restore
}

// overlayPath is the field of an overlay that decides the Installation
// field at pointer, as a path under spec: the overlay's ipPools replace the
// whole list, and calicoNetwork is merged field by field.
func overlayPath(pointer string) string {
	parts := calico.Segments(pointer)
	if len(parts) > 0 && parts[0] == "spec" {
		parts = parts[1:]
	}
	n := 1
	if len(parts) >= 2 && parts[0] == "calicoNetwork" {
		n = 2
	}
	return strings.Join(parts[:min(n, len(parts))], ".")
}

// overlayValue is the overlay's value at a path under spec, as it reads in
// YAML flow style; false when the overlay does not set it.
func overlayValue(overlay *operatorv1.Installation, path string) (string, bool) {
	if overlay == nil {
		return "", false
	}
	// The fields the preflight names read as it names them.
	for _, f := range calico.OverlayConflicts(overlay) {
		if f.Path == path {
			return f.Value, true
		}
	}
	var spec any
	raw, _ := json.Marshal(overlay.Spec)
	if json.Unmarshal(raw, &spec) != nil {
		return "", false
	}
	for _, part := range strings.Split(path, ".") {
		m, ok := spec.(map[string]any)
		if !ok {
			return "", false
		}
		spec = m[part]
	}
	if spec == nil {
		return "", false
	}
	if s, ok := spec.(string); ok {
		return s, true
	}
	out, _ := json.Marshal(spec)
	return string(out), true
}

// heldBefore is what the recorded overlay held at a path under spec.
func heldBefore(o *v1alpha1.OriginalOverlay, path string) (string, bool) {
	if o == nil || !o.Present {
		return "", false
	}
	switch path {
	case "calicoNetwork.bgp":
		return o.BGP.Value, o.BGP.Present
	case "calicoNetwork.windowsDataplane":
		return o.WindowsDataplane.Value, o.WindowsDataplane.Present
	case "calicoNetwork.ipPools":
		raw, _ := json.Marshal(o.Pools)
		return string(raw), o.PoolsPresent
	case "serviceCIDRs":
		raw, _ := json.Marshal(o.ServiceCIDRs.Values)
		return string(raw), o.ServiceCIDRs.Present
	case "windowsNodes":
		return "a value", o.WindowsNodesPresent
	}
	return "", false
}

// putNull sets the path under spec to null in a merge patch.
func putNull(patch map[string]any, path string) {
	parts := strings.Split(path, ".")
	for _, part := range parts[:len(parts)-1] {
		next, ok := patch[part].(map[string]any)
		if !ok {
			next = map[string]any{}
			patch[part] = next
		}
		patch = next
	}
	patch[parts[len(parts)-1]] = nil
}
