package controllers

import (
	"maps"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// A step's turn: the walk, the input its steps decide from and what the
// stages of one step share. The stages are in walk.go, the riders that join
// them in riders.go.

// mayChange says why the next change of a step may not be made now; a done
// outcome when it may. It decides from the scope alone, so that a batch can
// ask it about later steps without side effects.
type mayChange func(s *scope, step v1alpha1.StepName) Outcome

// walk runs the steps in order toward dir. Each step reads the cluster and
// lists its changes; a step with changes due makes them unless allowed says
// why not. It is done once every step has settled.
type walk struct {
	*Reconciler
	steps   []phase.Step
	dir     v1alpha1.Direction
	allowed mayChange
}

// waitingFor is a step waiting for Calico to apply what is written.
func waitingFor(what string) Outcome {
	return Outcome{Reason: conditions.ReasonWaitingForCalico, Message: "waiting for " + what}
}

// input is what the steps decide from, toward dir: the cluster as read from
// the Installation on, the targets and the originals recorded so far.
func input(s *scope, dir v1alpha1.Direction) phase.Input {
	return phase.Input{Cluster: &calico.Cluster{Installation: s.inst, Overlay: s.calico.overlay, Health: maps.Clone(s.calico.read)},
		Originals: s.wr.Status.Originals, Targets: targetsOf(s.wr.Status.Targets), Direction: dir}
}

// stepTurn is one step's turn in a pass: what its stages share.
type stepTurn struct {
	step phase.Step
	in   phase.Input
	// rest are the steps after it, which a batch may join.
	rest []phase.Step
	// changes are the step's diff; due are those the write makes.
	changes, due []calico.Change
	// batch is the write: the due changes, the later steps' joined and what
	// the riders add.
	batch batched
	// ended ends the turn, done, before the stages that follow.
	ended bool
}

// batched are the changes one write makes, and the later steps they include.
type batched struct {
	changes []calico.Change
	steps   []v1alpha1.StepName
}

// targetsOf are the targets the status records, as the steps take them.
func targetsOf(t *v1alpha1.Targets) phase.Targets {
	if t == nil {
		return phase.Targets{}
	}
	return phase.Targets{ServiceCIDRs: t.ServiceCIDRs, Host: t.APIServerHost, Port: t.APIServerPort}
}
