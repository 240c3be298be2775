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

func (WindowsDataplane) Name() v1alpha1.StepName { return v1alpha1.StepWindowsDataplane }

func (WindowsDataplane) Record(_ context.Context, s *Scope, o *v1alpha1.Originals) error {
	o.WindowsDataplane = original(calico.WindowsDataplane(s.Installation))
	o.WindowsNodesPresent = s.Installation.Spec.WindowsNodes != nil
	return nil
}

func (WindowsDataplane) target(s *Scope, dir v1alpha1.Direction) *string {
	if dir == v1alpha1.DirectionRollback {
		return value(s.Originals.WindowsDataplane)
	}
	hns := string(operatorv1.WindowsDataplaneHNS)
	return &hns
}

// staleWindowsNodes is true when spec.windowsNodes, which the Tigera operator
// defaulted while Windows was on, must go: its validation rejects it once
// Windows is off.
func staleWindowsNodes(s *Scope, dir v1alpha1.Direction) bool {
	return dir == v1alpha1.DirectionRollback && !s.Originals.WindowsNodesPresent &&
		s.Installation.Spec.WindowsNodes != nil
}

func (w WindowsDataplane) Holds(_ context.Context, s *Scope, dir v1alpha1.Direction) (bool, error) {
	return sameValue(calico.WindowsDataplane(s.Installation), w.target(s, dir)) && !staleWindowsNodes(s, dir), nil
}

func (w WindowsDataplane) Observe(ctx context.Context, s *Scope, dir v1alpha1.Direction) (State, error) {
	if ok, _ := w.Holds(ctx, s, dir); !ok {
		return notHeld(), nil
	}
	if dir == v1alpha1.DirectionRollback {
		return settledAt(ctx, s, calico.StatusCalico)
	}
	ds, err := calico.ReadDaemonSet(ctx, s.Client, calico.WindowsNodeDaemonSet)
	if err != nil {
		return State{}, err
	}
	if ds == nil {
		return waiting("the Tigera operator to render DaemonSet calico-system/calico-node-windows"), nil
	}
	// calico-windows carries no Installation generation: only its Degraded
	// condition is evidence, next to calico healthy at the new generation.
	win, err := calico.ReadHealth(ctx, s.Client, calico.StatusCalicoWindows)
	if err != nil {
		return State{}, err
	}
	if win.Degraded {
		return waiting("TigeraStatus calico-windows to recover from Degraded: " + win.Message), nil
	}
	return settledAt(ctx, s, calico.StatusCalico)
}

func (w WindowsDataplane) Change(ctx context.Context, s *Scope, dir v1alpha1.Direction) error {
	p := &calico.Patch{}
	calico.EnsureCalicoNetwork(p, s.Installation)
	setOrUnset(p, calico.PathWindowsDataplane, calico.WindowsDataplane(s.Installation), w.target(s, dir))
	if staleWindowsNodes(s, dir) {
		p.Remove(calico.PathWindowsNodes)
	}
	return p.Apply(ctx, s.Client, s.Installation)
}

func (w WindowsDataplane) Plan(_ context.Context, s *Scope, dir v1alpha1.Direction) ([]v1alpha1.PlannedChange, error) {
	changes := fieldChange(v1alpha1.StepWindowsDataplane, "spec.calicoNetwork.windowsDataplane",
		calico.WindowsDataplane(s.Installation), w.target(s, dir))
	if staleWindowsNodes(s, dir) {
		changes = append(changes, v1alpha1.PlannedChange{Step: v1alpha1.StepWindowsDataplane, Object: installationObject,
			Field: "spec.windowsNodes", Before: "<set by the Tigera operator>", After: Absent})
	}
	return changes, nil
}
