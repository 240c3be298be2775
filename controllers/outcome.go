package controllers

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// Outcome is how far a sub-reconciler got in a pass. The zero Outcome is
// "done, go on": the pass runs the next sub-reconciler. Any other stops the
// pass there, and conclude turns it into Ready, Reconciling and Stalled, the
// phase, an Event and the result, by what the conditions catalogue says its
// reason means; no sub-reconciler sets those conditions itself.
type Outcome struct {
	// Reason is a reason of the conditions catalogue; "" with no Err is done.
	Reason string
	// Message says what is waited for, why the pass stopped, or what is done.
	Message string
	// Step, on a wait for Calico, is the step whose progress deadline the
	// wait counts against (conclude may turn it into StepTimeout).
	Step v1alpha1.StepName
	// After is when to look again at the latest, also on a done outcome (a
	// hold of calico-node that goes on while the pass does).
	After time.Duration
	// Err is a read or write that failed: it goes to the workqueue's rate
	// limiter, and the status says what failed and when the next try is.
	Err error
}

// Done reports whether the pass goes on to the next sub-reconciler.
func (o Outcome) Done() bool { return o.Reason == "" && o.Err == nil }

// done is the outcome of a sub-reconciler with nothing left to do now.
func done() Outcome { return Outcome{} }

// stop ends the pass on reason: conclude decides from the catalogue whether
// it waits, holds, stalls or completes.
func stop(reason, format string, args ...any) Outcome {
	return Outcome{Reason: reason, Message: sprintf(format, args...)}
}

// progressing is work under way that needs no step's deadline (a probe round
// running, the originals just recorded).
func progressing(after time.Duration, format string, args ...any) Outcome {
	return Outcome{Reason: conditions.ReasonProgressing, Message: sprintf(format, args...), After: after}
}

// failed is a read or write that failed.
func failed(err error) Outcome { return Outcome{Err: err} }

// lookAgain keeps the earlier of o's wake-up and after.
func (o Outcome) lookAgain(after time.Duration) Outcome {
	if after > 0 && (o.After == 0 || after < o.After) {
		o.After = after
	}
	return o
}

// subReconciler takes one part of a pass as far as it goes: preflight,
// targets, originals, the node rounds, the walk, the rollback guard, the join
// watch. Each lives in a file of its own.
type subReconciler interface {
	reconcile(ctx context.Context, s *scope) Outcome
}

// sequence runs the sub-reconcilers in order and stops at the first whose
// outcome is not done; a done outcome's wake-up is kept for the pass.
func sequence(ctx context.Context, s *scope, subs ...subReconciler) Outcome {
	var after time.Duration
	for _, sub := range subs {
		o := sub.reconcile(ctx, s)
		if !o.Done() {
			return o.lookAgain(after)
		}
		after = o.lookAgain(after).After
	}
	return Outcome{After: after}
}

// subFunc adapts a function to a subReconciler.
type subFunc func(ctx context.Context, s *scope) Outcome

func (f subFunc) reconcile(ctx context.Context, s *scope) Outcome { return f(ctx, s) }

// permanentAfter is how many times in a row a refused write is tried before
// winready stops and asks a person: a refusal can be the moment an admission
// policy or a role is being rolled out.
const permanentAfter = 3

// permanent says whether the API server refused a request in a way that
// trying again cannot change.
func permanent(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) ||
		apierrors.IsRequestEntityTooLargeError(err)
}
