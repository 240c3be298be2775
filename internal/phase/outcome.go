package phase

import (
	"time"

	"github.com/winready/winready/api/v1alpha1"
)

// Kind is how far a step got in one reconcile.
type Kind int

// The kinds, from furthest to least far.
const (
	// Done: the cluster holds the step's target and Calico has applied it.
	Done Kind = iota
	// Waiting: the target is written; Calico is applying it, or the write
	// has not shown yet.
	Waiting
	// Blocked: the step must change the cluster but may not now; the reason
	// (from the conditions catalogue) says whether a person is needed.
	Blocked
	// Failed: a read or write failed; it is retried.
	Failed
)

// Outcome is where a walk over the steps stopped, or that it finished.
type Outcome struct {
	Kind Kind
	// Step is the step it stopped at, with its position in the walk.
	Step         v1alpha1.StepName
	Index, Total int
	// Reason is a Blocked outcome's condition reason.
	Reason string
	// Message says what is waited for or why the step is blocked.
	Message string
	// Unseen is set on a Waiting outcome whose own write has not shown in
	// the cache yet: it is looked at again soon.
	Unseen bool
	// Reported is set on a Waiting outcome whose conditions are already
	// set (a check running after the step); it is looked at again After.
	Reported bool
	// After, on a Waiting outcome, is when to look again at the latest.
	After time.Duration
	Err   error
}

// Finished is the outcome of a walk whose every step is done.
func Finished() Outcome { return Outcome{Kind: Done} }

// WaitingFor is a step waiting for what.
func WaitingFor(what string) Outcome { return Outcome{Kind: Waiting, Message: what} }

// BlockedBy is a step that may not change the cluster now, for reason.
func BlockedBy(reason, why string) Outcome {
	return Outcome{Kind: Blocked, Reason: reason, Message: why}
}

// FailedWith is a step whose read or write failed.
func FailedWith(err error) Outcome { return Outcome{Kind: Failed, Err: err} }

// At places an outcome at step n of total in the walk.
func (o Outcome) At(step v1alpha1.StepName, n, total int) Outcome {
	o.Step, o.Index, o.Total = step, n, total
	return o
}
