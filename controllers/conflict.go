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
// commit to its source. Once it has stopped, the revert that stopped it is
// not counted again by every pass that sees it.
func (w walk) reverted(ctx context.Context, s *scope, name v1alpha1.StepName, changes []calico.Change) Outcome {
	rec := s.steps().entry(name)
	// Read past the cache, which drops managedFields.
	inst, err := calico.GetInstallation(ctx, w.APIReader)
	if err != nil {
		return failed(err)
	}
	who := "another field manager"
	if inst != nil {
		if manager := calico.LastManager(inst, changes, FieldOwner); manager != "" {
			who = fmt.Sprintf("field manager %q", manager)
		}
	}
	if rec.Reverts <= maxReverts {
		rec.Reverts++
		if rec.Reverts <= maxReverts {
			s.note(corev1.EventTypeWarning, conditions.ReasonValueReverted, string(name),
				"%s put back the value of %s; applying it again (%d of %d)", who, name, rec.Reverts, maxReverts)
		}
	}
	if rec.Reverts <= maxReverts {
		return done()
	}
	return stop(conditions.ReasonConflictingManager, "%s keeps putting back what step %s changes (%d times); winready stops here instead of fighting it. "+
		"Commit this to the source of that manager (e.g. the Installation in Git); winready goes on by itself once the value stays:\n%s",
		who, name, rec.Reverts, calico.CommitYAML(changes))
}

// overlaid stops a step whose target Installation default holds but
// Installation overlay overrides, written or changed after the originals
// were recorded: the cluster runs the overlay's value, so a migration is not
// Windows-ready and a rollback has not restored the original. winready never
// writes the overlay (record.Overlay says why); the condition names its
// fields, as it names a manager that reverts default, and the step goes on by
// itself once the overlay no longer overrides it.
func (w walk) overlaid(ctx context.Context, step phase.Step, in phase.Input) Outcome {
	changes := phase.Overridden(step, in)
	if len(changes) == 0 {
		return done()
	}
	manager := ""
	// Read past the cache, which drops managedFields.
	live, err := calico.GetOverlay(ctx, w.APIReader)
	if err != nil {
		return failed(err)
	}
	if live != nil {
		manager = calico.LastManager(live, changes, FieldOwner)
	}
	return stop(conditions.ReasonConflictingManager, "%s", phase.OverlayConflict(step.Name(), in, changes, manager))
}
