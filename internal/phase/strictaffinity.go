package phase

import (
	"context"
	"strconv"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// StrictAffinity sets IPAM strictAffinity, which Windows nodes need because
// they cannot use addresses borrowed from another node's block.
type StrictAffinity struct{}

func (StrictAffinity) Name() v1alpha1.StepName { return v1alpha1.StepStrictAffinity }

func (StrictAffinity) Record(ctx context.Context, s *Scope, o *v1alpha1.Originals) error {
	cfg, err := calico.GetIPAMConfig(ctx, s.Reader)
	if err != nil {
		return err
	}
	o.IPAMConfig = v1alpha1.OriginalIPAMConfig{Present: cfg != nil}
	if cfg != nil {
		o.IPAMConfig.StrictAffinity = cfg.Spec.StrictAffinity
	}
	return nil
}

func (a StrictAffinity) Observe(ctx context.Context, s *Scope, dir v1alpha1.Direction) (State, error) {
	if ok, err := a.Holds(ctx, s, dir); err != nil || !ok {
		return notHeld(), err
	}
	// Calico reads the IPAM configuration at allocation time: nothing rolls out.
	return done(), nil
}

func (StrictAffinity) Holds(ctx context.Context, s *Scope, dir v1alpha1.Direction) (bool, error) {
	cfg, err := calico.GetIPAMConfig(ctx, s.Reader)
	if err != nil {
		return false, err
	}
	want := wantIPAM(s, dir)
	return (cfg != nil) == want.Present && (cfg == nil || cfg.Spec.StrictAffinity == want.StrictAffinity), nil
}

func (StrictAffinity) Change(ctx context.Context, s *Scope, dir v1alpha1.Direction) error {
	cfg, err := calico.GetIPAMConfig(ctx, s.Reader)
	if err != nil {
		return err
	}
	want := wantIPAM(s, dir)
	if !want.Present {
		if cfg == nil {
			return nil
		}
		return calico.DeleteIPAMConfig(ctx, s.Client, cfg)
	}
	return calico.SetStrictAffinity(ctx, s.Client, cfg, want.StrictAffinity)
}

func wantIPAM(s *Scope, dir v1alpha1.Direction) v1alpha1.OriginalIPAMConfig {
	if dir == v1alpha1.DirectionRollback {
		return s.Originals.IPAMConfig
	}
	return v1alpha1.OriginalIPAMConfig{Present: true, StrictAffinity: true}
}

func (StrictAffinity) Plan(ctx context.Context, s *Scope, dir v1alpha1.Direction) ([]v1alpha1.PlannedChange, error) {
	cfg, err := calico.GetIPAMConfig(ctx, s.Reader)
	if err != nil {
		return nil, err
	}
	want := wantIPAM(s, dir)
	before, after := Absent, Absent
	if cfg != nil {
		before = strconv.FormatBool(cfg.Spec.StrictAffinity)
	}
	if want.Present {
		after = strconv.FormatBool(want.StrictAffinity)
	}
	if before == after {
		return nil, nil
	}
	return []v1alpha1.PlannedChange{{Step: v1alpha1.StepStrictAffinity, Object: "IPAMConfiguration default",
		Field: "spec.strictAffinity", Before: before, After: after}}, nil
}
