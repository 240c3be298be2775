package phase

import (
	"context"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// StrictAffinity sets IPAM strictAffinity, which Windows nodes need because
// they cannot use addresses borrowed from another node's block.
type StrictAffinity struct{}

// Name implements Step.
func (StrictAffinity) Name() v1alpha1.StepName { return v1alpha1.StepStrictAffinity }

func (StrictAffinity) Read(ctx context.Context, r Readers, c *calico.Cluster) (err error) {
	c.IPAMConfig, err = calico.GetIPAMConfig(ctx, r.API)
	return err
}

// Record keeps strictAffinity, and whether the IPAM configuration existed.
func (StrictAffinity) Record(c *calico.Cluster, o *v1alpha1.Originals) {
	o.IPAMConfig = v1alpha1.OriginalIPAMConfig{Present: c.IPAMConfig != nil}
	if c.IPAMConfig != nil {
		o.IPAMConfig.StrictAffinity = c.IPAMConfig.Spec.StrictAffinity
	}
}

// Diff changes the field, or creates or deletes the whole configuration:
// Calico treats an absent one as strictAffinity false.
func (StrictAffinity) Diff(in Input) []calico.Change {
	want := v1alpha1.OriginalIPAMConfig{Present: true, StrictAffinity: true}
	if in.rollback() {
		want = in.Originals.IPAMConfig
	}
	cfg := in.Cluster.IPAMConfig
	if cfg != nil && !want.Present {
		return []calico.Change{{Object: calico.ObjectIPAMConfig, Old: calico.Of(nil)}}
	}
	old := calico.Value{}
	if cfg != nil {
		old = calico.Of(cfg.Spec.StrictAffinity)
	}
	if !want.Present {
		return nil
	}
	return calico.FieldChange(calico.ObjectIPAMConfig, calico.PathStrictAffinity, old, calico.Of(want.StrictAffinity))
}

// Settled is immediate: Calico reads the IPAM configuration at allocation
// time, nothing rolls out.
func (StrictAffinity) Settled(Input) (bool, string) { return true, "" }
