package controllers

import (
	"context"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/phase"
)

// A rider is a concern that rides along with every step of the walk rather
// than being a step of its own: the rollout speed (rolloutspeed.go), the
// canary (canary.go), the hold of calico-node (hold.go) and the pod network
// check (podcheck.go). Each
// implements the whole interface in its own file; a rider added later
// implements it and joins riders, and the walk's stages (walk.go) call it
// where a step's turn reaches each point.
type rider interface {
	// join adds the rider's changes to a write: t.batch holds the step's
	// due changes and those of the later steps batched with it.
	join(s *scope, t *stepTurn)
	// prepare runs right before the write of t.batch, which it may extend.
	prepare(ctx context.Context, w walk, s *scope, t *stepTurn) error
	// prove runs once the step has settled and its overlay holds; a result
	// that is not done keeps the step from finishing.
	prove(ctx context.Context, w walk, s *scope, t *stepTurn) Outcome
	// plan adds the rider's changes to a dry run's plan.
	plan(s *scope, in phase.Input, plan []v1alpha1.PlannedChange) []v1alpha1.PlannedChange
}

// rollingRider is a rider that also acts while a step's write rolls out, before
// the step has settled.
type rollingRider interface {
	rolling(ctx context.Context, w walk, s *scope, t *stepTurn) Outcome
}

// riders ride along with every step, in this order at each point. A rider
// that also implements rollingRider (the canary) is called while the step's write
// rolls out, before the step has settled; an outcome that is not done takes
// the place of the step's own wait.
var riders = []rider{rolloutSpeed{}, rolloutCanary{}, calicoNodeHold{}, podNetworkCheck{}}
