package phase

import (
	"context"

	operatorv1 "github.com/tigera/operator/api/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// WindowsDataplane switches the Windows dataplane to HNS, after which the
// Tigera operator renders calico-node-windows for Windows nodes to run.
type WindowsDataplane struct{}

// Name implements Step.
func (WindowsDataplane) Name() v1alpha1.StepName { return v1alpha1.StepWindowsDataplane }

func (WindowsDataplane) Read(ctx context.Context, r Readers, c *calico.Cluster) (err error) {
	if c.WindowsNode, err = calico.ReadDaemonSet(ctx, r.Cache, calico.WindowsNodeDaemonSet); err != nil {
		return err
	}
	return readHealth(ctx, r, c, calico.StatusCalico, calico.StatusCalicoWindows)
}

// Record keeps the Windows dataplane and whether spec.windowsNodes was set.
func (WindowsDataplane) Record(c *calico.Cluster, o *v1alpha1.Originals) {
	o.WindowsDataplane = original(calico.OfString(calico.WindowsDataplane(c.Installation)))
	o.WindowsNodesPresent = c.Installation.Spec.WindowsNodes != nil
}

func (WindowsDataplane) target(in Input) calico.Value {
	if in.rollback() {
		return value(in.Originals.WindowsDataplane)
	}
	return calico.Of(string(operatorv1.WindowsDataplaneHNS))
}

// Diff sets the Windows dataplane to HNS, or back to the original.
func (w WindowsDataplane) Diff(in Input) []calico.Change {
	inst := in.Cluster.Installation
	changes := calico.FieldChange(calico.ObjectInstallation, calico.PathWindowsDataplane,
		calico.OfString(calico.WindowsDataplane(inst)), w.target(in))
	// spec.windowsNodes, which the Tigera operator defaults while Windows is
	// on, must go when it was absent before: the operator's validation
	// rejects it once Windows is off.
	if in.rollback() && !in.Originals.WindowsNodesPresent && inst.Spec.WindowsNodes != nil {
		changes = append(changes, calico.Change{Object: calico.ObjectInstallation, Pointer: calico.PathWindowsNodes,
			Old: calico.Value{Present: true, V: "", Opaque: true}})
	}
	return changes
}

// Settled waits, when migrating, for calico-node-windows to be rendered and
// TigeraStatus calico-windows not Degraded; in both directions for
// TigeraStatus calico healthy at the new generation.
func (WindowsDataplane) Settled(in Input) (bool, string) {
	if in.rollback() {
		return in.Cluster.SettledAt(calico.StatusCalico)
	}
	if in.Cluster.WindowsNode == nil {
		return false, "the Tigera operator to render DaemonSet calico-system/calico-node-windows"
	}
	// calico-windows carries no Installation generation: only its Degraded
	// condition is evidence, next to calico healthy at the new generation.
	if win := in.Cluster.Health[calico.StatusCalicoWindows]; win.Degraded {
		return false, "TigeraStatus calico-windows to recover from Degraded: " + win.Message
	}
	return in.Cluster.SettledAt(calico.StatusCalico)
}
