package controllers

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/round"
)

// roundStep takes one round of agents on the round engine from its start to
// its verdict, a pass at a time, for one of its users: the UDP 4789 probe
// (probeRound), the pod network check (podCheck) and the canary's check
// (rolloutCanary). The lifecycle is the same for all three and lives here
// once; each user supplies only what differs: its engine and spec, where
// its status keeps the round (started), what it says while the round runs
// (waiting), how it judges the results and what its verdict is (judge), and
// how it stops when its round cannot be started (refused).
//
// A pass through run:
//
//   - fresh or start: with no round that still stands in the status (nil),
//     a new one starts on every Linux node (start). A start the API server
//     refuses for good (a permanent error, on the permanentAfter-th pass in
//     a row that failed) stops with one message for every user: what could
//     not be started, the API server's words, what to fix, and how to run
//     it again. Any other failure is retried with the workqueue's backoff.
//   - advance: a round under way is moved on (Advance) and the pass waits,
//     with the user's progress message, until it is Complete.
//   - results or restart: a complete round's plans and reports are read;
//     when the plans are gone (removed by hand, or replaced by another
//     round) the round starts again (restart, by default a new start).
//   - judge and complete: the round's CompletedAt is set and the user sums
//     the results up in the status.
//   - checkpoint and cleanup: the status is saved before the reports are
//     deleted, so that a status write that fails leaves them for the next
//     pass; then the round's agents, objects, plans and reports go.
//   - verdict: the user's Event and its passed or failed outcome.
//
// A round the spec no longer wants (skipped, disabled, paused, a dry run, a
// rollback) is removed by cancel.
type roundStep[P, R any] struct {
	r *Reconciler
	// what names the round in the refusal's message ("the UDP 4789
	// probe"); starting prefixes any other failure of its start.
	what, starting string
	// fix names what the API server may be refusing, and rerun how a
	// person runs the round again once it is fixed.
	fix, rerun string
	// token is the rerun annotation's token a new round runs for.
	token round.Token
	// reports names, for the checkpoint's error, what it is saved before.
	reports string
	// engine is the kind's engine, and the spec of round id run for token.
	engine func(id round.ID, token round.Token) (*round.Engine[P, R], round.Spec[P])
	// prepare, when set, reads what a round needs before it starts and may
	// change its spec.
	prepare func(ctx context.Context, spec *round.Spec[P]) error
	// started keeps st, the state of a round just started with spec, in
	// the status, notes it, and says what the pass waits for.
	started func(st v1alpha1.RoundState, spec round.Spec[P]) Outcome
	// advanced, when set, reads each progress of a round under way first;
	// it may end the round itself (none of its agents served), with end.
	advanced func(ctx context.Context, e *round.Engine[P, R], p round.Progress) (o Outcome, end bool)
	// waiting says what the pass waits for while the round is not complete.
	waiting func(p round.Progress) Outcome
	// restart, when set, replaces a new start when the plans are gone.
	restart func() Outcome
	// judge sums the results of a complete round up in the status (its
	// CompletedAt set) and returns the verdict, given once the reports are
	// deleted: its Event and how the pass goes on.
	judge func(ctx context.Context, res round.Results[P, R]) (verdict func() Outcome)
	// refused stops on a start the API server refused for good, with msg.
	refused func(msg string) Outcome
}

// run starts a round when st is nil (none that still stands) and follows
// one under way to its verdict. over says st is a round that is over,
// whose verdict the user reads from its status.
func (k roundStep[P, R]) run(ctx context.Context, s *scope, st *v1alpha1.RoundState) (o Outcome, over bool) {
	switch {
	case st == nil:
		return k.start(ctx, s), false
	case st.CompletedAt == nil:
		return k.collect(ctx, s, st), false
	}
	return done(), true
}

// start starts a new round on every Linux node.
func (k roundStep[P, R]) start(ctx context.Context, s *scope) Outcome {
	e, spec := k.engine(round.NewID(s.wr.Generation, s.now), k.token)
	if k.prepare != nil {
		if err := k.prepare(ctx, &spec); err != nil {
			return failed(err)
		}
	}
	var st v1alpha1.RoundState
	if err := e.Start(ctx, s.now, spec, &st); err != nil {
		return k.startFailed(s, err)
	}
	return k.started(st, spec)
}

// startFailed is the one rule for a start that failed: a refusal that
// trying again cannot change (an admission policy, a quota, the image),
// on the permanentAfter-th pass in a row that failed, stops and asks a
// person; any other failure is retried with the workqueue's backoff. A
// refusal while the object already stops on this round's refused start (a
// pass after a restart of the manager, whose workqueue counts from zero)
// stops at once, as a refused write does (concludeError).
func (k roundStep[P, R]) startFailed(s *scope, err error) Outcome {
	if attempts := s.failures + 1; permanent(err) && (attempts >= permanentAfter || k.stalledOnStart(s)) {
		return k.refused(fmt.Sprintf("%s%s %d attempts: %v. Fix what the API server says (%s), then %s",
			k.what, notStarted, max(attempts, permanentAfter), err, k.fix, k.rerun))
	}
	return failed(fmt.Errorf("%s: %w", k.starting, err))
}

// notStarted follows the round's name in the stop of a refused start.
const notStarted = " could not be started in"

// stalledOnStart says whether the object stalled, before this pass, because
// this round could not be started.
func (k roundStep[P, R]) stalledOnStart(s *scope) bool {
	c := s.stalled()
	return c != nil && strings.Contains(c.Message, k.what+notStarted)
}

// collect moves the round in st on and, once it is complete, judges it,
// saves the status, removes the round and gives the verdict.
func (k roundStep[P, R]) collect(ctx context.Context, s *scope, st *v1alpha1.RoundState) Outcome {
	e, spec := k.engine(round.ID(st.Round), round.TokenOfState(st))
	progress, err := e.Advance(ctx, s.now, spec, st)
	if err != nil {
		return failed(err)
	}
	if k.advanced != nil {
		if o, end := k.advanced(ctx, e, progress); end {
			return o
		}
	}
	if progress.Stage != round.Complete {
		return k.waiting(progress)
	}
	res, ok, err := e.Results(ctx, st)
	if err != nil {
		return failed(err)
	}
	if !ok {
		// The plans are gone (removed by hand, or a round replaced them):
		// the round runs again.
		if k.restart != nil {
			return k.restart()
		}
		return k.start(ctx, s)
	}
	completed := metav1.NewTime(s.now)
	st.CompletedAt = &completed
	verdict := k.judge(ctx, res)
	// The reports are deleted only once the status that sums them up is
	// saved: a status write that fails leaves them for the next pass.
	if err := k.r.checkpoint(ctx, s, k.reports); err != nil {
		return failed(err)
	}
	if err := e.Cleanup(ctx); err != nil {
		return failed(err)
	}
	return verdict()
}

// cancel removes the round in st when it is under way, and says whether
// it was.
func (k roundStep[P, R]) cancel(ctx context.Context, st *v1alpha1.RoundState) (bool, error) {
	e, _ := k.engine(round.ID(st.Round), "")
	return e.Stop(ctx, st)
}
