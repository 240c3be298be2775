package kit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// applyOwner is the field manager of the WindowsReadiness the test applies.
const applyOwner = "winready-kit"

// pollInterval is how often a wait reads the WindowsReadiness.
const pollInterval = 50 * time.Millisecond

// Verdict is the preflight's outcome as the WindowsReadiness status shows it.
type Verdict struct {
	// Passed says every compatibility check passed or warned and the UDP 4789
	// probe passed. A dry run does not probe: there it says the checks passed.
	Passed bool
	// Reason and Message are those of the PreflightPassed condition, e.g.
	// PreflightFailed and the failed checks with their fixes.
	Reason, Message string
	// Checks are status.preflight.checks: every check with its result.
	Checks []v1alpha1.PreflightCheck
}

// Failed are the checks that failed.
func (v Verdict) Failed() []v1alpha1.PreflightCheck {
	var failed []v1alpha1.PreflightCheck
	for _, c := range v.Checks {
		if c.Result == v1alpha1.CheckFail {
			failed = append(failed, c)
		}
	}
	return failed
}

// Plan is what a dry run of a manifest shows: the same status.plan that
// `winready plan` prints.
type Plan struct {
	Preflight Verdict
	// Targets are the values the migration would write and where they come
	// from; nil when the preflight failed.
	Targets *v1alpha1.Targets
	// Changes are every change, in order; nil when the preflight failed.
	Changes []v1alpha1.PlannedChange
}

// Apply applies a WindowsReadiness manifest (YAML or JSON) as a GitOps tool
// does, with server-side apply: fields it no longer holds are removed, so
// applying a manifest after Plan applied it as a dry run starts the migration.
// It returns the object as stored.
func (c *Cluster) Apply(ctx context.Context, manifest []byte) (*v1alpha1.WindowsReadiness, error) {
	return c.apply(ctx, manifest, false)
}

func (c *Cluster) apply(ctx context.Context, manifest []byte, dryRun bool) (*v1alpha1.WindowsReadiness, error) {
	u, err := windowsReadiness(manifest)
	if err != nil {
		return nil, err
	}
	if dryRun {
		if err := unstructured.SetNestedField(u.Object, true, "spec", "dryRun"); err != nil {
			return nil, err
		}
	}
	err = c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(applyOwner), client.ForceOwnership)
	if err != nil {
		return nil, fmt.Errorf("applying WindowsReadiness %s: %w", u.GetName(), err)
	}
	return c.Get(ctx)
}

// windowsReadiness is the one WindowsReadiness of a manifest.
func windowsReadiness(manifest []byte) (*unstructured.Unstructured, error) {
	objs, err := decodeAll(manifest)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest: %w", err)
	}
	if len(objs) != 1 || objs[0].GroupVersionKind() != v1alpha1.GroupVersion.WithKind("WindowsReadiness") {
		return nil, fmt.Errorf("the manifest must hold one %s WindowsReadiness", v1alpha1.GroupVersion)
	}
	return objs[0], nil
}

// Get reads the WindowsReadiness from the API server.
func (c *Cluster) Get(ctx context.Context) (*v1alpha1.WindowsReadiness, error) {
	return GetWindowsReadiness(ctx, c.client)
}

// WaitPhase waits until the WindowsReadiness shows phase for its current
// generation, and returns it. It returns an error, with the status message,
// as soon as winready is Stalled when another phase is waited for: a person
// would be needed.
func (c *Cluster) WaitPhase(ctx context.Context, phase v1alpha1.Phase) (*v1alpha1.WindowsReadiness, error) {
	return c.wait(ctx, "phase "+string(phase), func(wr *v1alpha1.WindowsReadiness) (bool, error) {
		if !current(wr) {
			return false, nil
		}
		if wr.Status.Phase == phase {
			return true, nil
		}
		if wr.Status.Phase == v1alpha1.PhaseStalled {
			return false, stalled(wr)
		}
		return false, nil
	})
}

// Preflight waits for the preflight's verdict on the applied WindowsReadiness
// of direction Migrate.
func (c *Cluster) Preflight(ctx context.Context) (Verdict, error) {
	var v Verdict
	_, err := c.wait(ctx, "the preflight's verdict", func(wr *v1alpha1.WindowsReadiness) (bool, error) {
		var done bool
		if v, done = verdict(wr); done || !current(wr) {
			return done, nil
		}
		switch {
		case wr.Status.Phase == v1alpha1.PhaseStalled:
			return false, stalled(wr)
		case wr.Spec.Direction == v1alpha1.DirectionRollback:
			return false, errors.New("a rollback runs no preflight")
		}
		return false, nil
	})
	return v, err
}

// Plan applies manifest with spec.dryRun: true and returns the dry run's
// verdict and plan. Nothing in the cluster changes; apply the manifest as it
// is (Apply) to migrate. A rollback runs no preflight: its Preflight is zero,
// and where nothing is left to roll back it has no changes.
func (c *Cluster) Plan(ctx context.Context, manifest []byte) (Plan, error) {
	wr, err := c.apply(ctx, manifest, true)
	if err != nil {
		return Plan{}, err
	}
	var v Verdict
	if wr.Spec.Direction != v1alpha1.DirectionRollback {
		if v, err = c.Preflight(ctx); err != nil || !v.Passed {
			return Plan{Preflight: v}, err
		}
	}
	wr, err = c.wait(ctx, "the dry run's plan", func(wr *v1alpha1.WindowsReadiness) (bool, error) {
		switch {
		case !current(wr):
			return false, nil
		case wr.Status.Phase == v1alpha1.PhaseStalled:
			return false, stalled(wr)
		}
		return wr.Status.Phase == v1alpha1.PhasePlanned || wr.Status.Phase == v1alpha1.PhaseRolledBack, nil
	})
	if err != nil {
		return Plan{Preflight: v}, err
	}
	return Plan{Preflight: v, Targets: wr.Status.Targets, Changes: wr.Status.Plan}, nil
}

// Validate sends every object of manifest to the API server as a dry-run
// create with strict field validation: nothing is stored, and the error is
// the API server's, with the CRD's schema and CEL messages (an unknown field
// included). It checks WindowsReadiness manifests, and any object whose
// CRD or type the control plane has.
func (c *Cluster) Validate(ctx context.Context, manifest []byte) error {
	objs, err := decodeAll(manifest)
	if err != nil {
		return fmt.Errorf("reading the manifest: %w", err)
	}
	if len(objs) == 0 {
		return errors.New("the manifest holds no object")
	}
	var errs []error
	for _, u := range objs {
		if err := c.client.Create(ctx, u, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// wait reads the WindowsReadiness until done says so or fails, within the
// Cluster's timeout when ctx has no deadline.
func (c *Cluster) wait(ctx context.Context, what string, done func(*v1alpha1.WindowsReadiness) (bool, error)) (*v1alpha1.WindowsReadiness, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var last *v1alpha1.WindowsReadiness
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		wr, err := c.Get(ctx)
		if err != nil {
			return false, err
		}
		last = wr
		return done(wr)
	})
	if err != nil && ctx.Err() != nil && last != nil {
		return last, fmt.Errorf("waiting for %s: %w; the WindowsReadiness is %s: %s", what, err, last.Status.Phase, last.Status.Message)
	}
	if err != nil {
		return last, fmt.Errorf("waiting for %s: %w", what, err)
	}
	return last, nil
}

// current says whether the status is that of the spec's generation.
func current(wr *v1alpha1.WindowsReadiness) bool {
	ready := meta.FindStatusCondition(wr.Status.Conditions, conditions.Ready)
	return ready != nil && ready.ObservedGeneration == wr.Generation
}

// verdict reads the preflight's outcome: passed (it is not run again once
// the migration began), failed for the current generation, or, in a dry run,
// the compatibility checks passed.
func verdict(wr *v1alpha1.WindowsReadiness) (Verdict, bool) {
	pf := meta.FindStatusCondition(wr.Status.Conditions, conditions.PreflightPassed)
	if pf == nil {
		return Verdict{}, false
	}
	v := Verdict{Passed: pf.Status == metav1.ConditionTrue, Reason: pf.Reason, Message: pf.Message}
	if wr.Status.Preflight != nil {
		v.Checks = wr.Status.Preflight.Checks
	}
	switch {
	case pf.Status == metav1.ConditionTrue:
		return v, true
	case pf.Status == metav1.ConditionFalse:
		return v, pf.ObservedGeneration == wr.Generation
	case current(wr) && wr.Status.Phase == v1alpha1.PhasePlanned:
		v.Passed = true
		return v, true
	}
	return v, false
}

func stalled(wr *v1alpha1.WindowsReadiness) error {
	reason := ""
	if s := meta.FindStatusCondition(wr.Status.Conditions, conditions.Stalled); s != nil {
		reason = s.Reason
	}
	return fmt.Errorf("the WindowsReadiness is Stalled (%s): %s", reason, wr.Status.Message)
}
