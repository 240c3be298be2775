package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// maxReverts is how often winready puts a value back after another field
// manager reverted it, before it stops fighting and asks a person.
const maxReverts = 2

// reverted handles a value that another manager put back after a finished
// step had changed it toward the same target. It lets the step re-apply a
// bounded number of times, then stops it naming the manager and the YAML to
// commit to its source. It returns the outcome when the step stops.
func (p *pass) reverted(ctx context.Context, name v1alpha1.StepName, changes []calico.Change) *phase.Outcome {
	rec := p.step(name)
	rec.Reverts++
	who := "another field manager"
	// Read past the cache, which drops managedFields.
	inst, err := calico.GetInstallation(ctx, p.r.APIReader)
	if err != nil {
		o := phase.FailedWith(err)
		return &o
	}
	if inst != nil {
		if manager := calico.LastManager(inst, changes, FieldOwner); manager != "" {
			who = fmt.Sprintf("field manager %q", manager)
		}
	}
	if rec.Reverts <= maxReverts {
		p.event(corev1.EventTypeWarning, "ValueReverted", string(name), "%s put back the value of %s; applying it again (%d of %d)",
			who, name, rec.Reverts, maxReverts)
		return nil
	}
	msg := fmt.Sprintf("%s keeps putting back what step %s changes (%d times); winready stops here instead of fighting it. "+
		"Commit this to the source of that manager (e.g. the Installation in Git); winready goes on by itself once the value stays:\n%s",
		who, name, rec.Reverts, calico.CommitYAML(changes))
	if !p.alreadyStalled(conditions.ReasonConflictingManager) {
		p.event(corev1.EventTypeWarning, conditions.ReasonConflictingManager, string(name), "%s", msg)
	}
	o := phase.BlockedBy(conditions.ReasonConflictingManager, msg)
	return &o
}

// overlaid stops a step whose target Installation default holds but
// Installation overlay overrides, written or changed after the originals
// were recorded: the cluster runs the overlay's value, so a migration is not
// Windows-ready and a rollback has not restored the original. winready never
// writes the overlay (record.Overlay says why); the condition names its
// fields, as it names a manager that reverts default, and the step goes on by
// itself once the overlay no longer overrides it.
func (p *pass) overlaid(ctx context.Context, step phase.Step, in phase.Input) phase.Outcome {
	changes := phase.Overridden(step, in)
	if len(changes) == 0 {
		return phase.Finished()
	}
	manager := ""
	// Read past the cache, which drops managedFields.
	if live, err := calico.GetOverlay(ctx, p.r.APIReader); err != nil {
		return phase.FailedWith(err)
	} else if live != nil {
		manager = calico.LastManager(live, changes, FieldOwner)
	}
	msg := phase.OverlayConflict(step.Name(), in, changes, manager)
	if !p.alreadyStalled(conditions.ReasonConflictingManager) {
		p.event(corev1.EventTypeWarning, conditions.ReasonConflictingManager, string(step.Name()), "%s", msg)
	}
	return phase.BlockedBy(conditions.ReasonConflictingManager, msg)
}
