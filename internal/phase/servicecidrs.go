package phase

import (
	"context"
	"slices"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// ServiceCIDRs writes the service network into the Installation: calico-node
// on Windows programs it into HNS, and the Tigera operator rejects
// windowsDataplane HNS without it.
type ServiceCIDRs struct{}

// Name implements Step.
func (ServiceCIDRs) Name() v1alpha1.StepName { return v1alpha1.StepServiceCIDRs }

func (ServiceCIDRs) Read(ctx context.Context, r Readers, c *calico.Cluster) error {
	return readHealth(ctx, r, c, calico.StatusCalico)
}

// Record keeps the Installation's serviceCIDRs, and whether it had any.
func (ServiceCIDRs) Record(c *calico.Cluster, o *v1alpha1.Originals) {
	cidrs := c.Installation.Spec.ServiceCIDRs
	o.ServiceCIDRs = v1alpha1.OriginalList{Present: cidrs != nil, Values: slices.Clone(cidrs)}
}

// Diff sets serviceCIDRs to the targets' service network, or back to the
// original (absent when it was).
func (ServiceCIDRs) Diff(in Input) []calico.Change {
	want := calico.OfList(in.Targets.ServiceCIDRs)
	if in.rollback() {
		want = calico.Value{}
		if o := in.Originals.ServiceCIDRs; o.Present {
			want = calico.Of(slices.Clone(o.Values))
		}
	}
	return calico.FieldChange(calico.ObjectInstallation, calico.PathServiceCIDRs,
		calico.OfList(in.Cluster.Installation.Spec.ServiceCIDRs), want)
}

// Settled waits until TigeraStatus calico is healthy at the new generation.
func (ServiceCIDRs) Settled(in Input) (bool, string) {
	return in.Cluster.SettledAt(calico.StatusCalico)
}
