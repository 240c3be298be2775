package phase

import (
	"context"
	"slices"
	"strings"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// ServiceCIDRs writes the service network into the Installation: calico-node
// on Windows programs it into HNS, and the Tigera operator rejects
// windowsDataplane HNS without it.
type ServiceCIDRs struct{}

func (ServiceCIDRs) Name() v1alpha1.StepName { return v1alpha1.StepServiceCIDRs }

func (ServiceCIDRs) Record(_ context.Context, s *Scope, o *v1alpha1.Originals) error {
	cidrs := s.Installation.Spec.ServiceCIDRs
	o.ServiceCIDRs = v1alpha1.OriginalList{Present: cidrs != nil, Values: slices.Clone(cidrs)}
	return nil
}

func (ServiceCIDRs) target(s *Scope, dir v1alpha1.Direction) []string {
	if dir == v1alpha1.DirectionRollback {
		if !s.Originals.ServiceCIDRs.Present {
			return nil
		}
		return s.Originals.ServiceCIDRs.Values
	}
	return s.Targets.ServiceCIDRs
}

func (c ServiceCIDRs) Holds(_ context.Context, s *Scope, dir v1alpha1.Direction) (bool, error) {
	want, current := c.target(s, dir), s.Installation.Spec.ServiceCIDRs
	return slices.Equal(current, want) && (current == nil) == (want == nil), nil
}

func (c ServiceCIDRs) Observe(ctx context.Context, s *Scope, dir v1alpha1.Direction) (State, error) {
	if ok, _ := c.Holds(ctx, s, dir); !ok {
		return notHeld(), nil
	}
	return settledAt(ctx, s, calico.StatusCalico)
}

func (c ServiceCIDRs) Change(ctx context.Context, s *Scope, dir v1alpha1.Direction) error {
	p := &calico.Patch{}
	current := s.Installation.Spec.ServiceCIDRs
	var old any
	if current != nil {
		old = current
	}
	if want := c.target(s, dir); want == nil {
		p.Unset(calico.PathServiceCIDRs, old)
	} else {
		p.Set(calico.PathServiceCIDRs, old, want)
	}
	return p.Apply(ctx, s.Client, s.Installation)
}

func (c ServiceCIDRs) Plan(_ context.Context, s *Scope, dir v1alpha1.Direction) ([]v1alpha1.PlannedChange, error) {
	current, want := s.Installation.Spec.ServiceCIDRs, c.target(s, dir)
	if slices.Equal(current, want) && (current == nil) == (want == nil) {
		return nil, nil
	}
	return []v1alpha1.PlannedChange{{Step: v1alpha1.StepServiceCIDRs, Object: installationObject, Field: "spec.serviceCIDRs",
		Before: showList(current), After: showList(want)}}, nil
}

func showList(l []string) string {
	if l == nil {
		return Absent
	}
	return "[" + strings.Join(l, ", ") + "]"
}
