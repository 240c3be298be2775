// Package controllers holds the WindowsReadiness reconciler. A pass reads
// the object and the Installation into a scope, runs the sub-reconcilers in
// order (observe, the hold of calico-node, then the migration's or the
// rollback's: preflight, probe round, pod check, targets, originals, walk,
// join watch), and stops at the first that is not done. conclude turns that
// outcome into the conditions, the Events and the result; the status is
// written once, at the end of the pass, plus the named checkpoints where a
// record must be durable before the pass goes on.
//
// The files depend one way, each on files below it only (make lint checks
// it with hack/filegraph): at the bottom the vocabulary (scope.go,
// outcome.go, seen.go, stepkinds.go, calicopods.go) and the Reconciler with
// its Options (reconciler.go); above them the reads and the rounds
// (freshness.go, digest.go, roundstep.go), a step's turn (turn.go) and the
// riders (rolloutspeed.go, hold.go, podcheck.go, canary.go); then the walk
// (walk.go, its stages; riders.go, the riders in order), the directions
// (migration.go, rollback.go) and, on top, a pass (pass.go) and the wiring
// (setup.go).
package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/phase"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/round"
)

// Reconciler migrates the cluster to Windows-ready mode and back. Setup
// builds it.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server objects that are not cached.
	APIReader client.Reader
	// Discovery finds out whether projectcalico.org/v3 is served.
	Discovery preflight.Discovery
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Writes counts the writes Client makes.
	Writes *metrics.WriteCounter

	opts    Options
	limiter workqueue.TypedRateLimiter[ctrl.Request]
	// wakes counts each pass by what woke it.
	wakes wakes
	// seen keeps the newest WindowsReadiness and record this manager knows.
	seen seen
	// removed remembers the kinds of round whose objects this manager
	// removed last, so that their next start removes nothing first.
	removed round.Removed
}

// persist writes the status when it changed: once at the end of a pass, and
// at each checkpoint.
func (r *Reconciler) persist(ctx context.Context, s *scope) error {
	s.wr.Status.Phase = conditions.Phase(s.wr)
	metrics.RecordStatus(s.wr)
	fillColumns(&s.wr.Status)
	boundStatus(&s.wr.Status)
	if equality.Semantic.DeepEqual(s.before.Status, s.wr.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, s.wr, client.MergeFrom(s.before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing windowsreadiness status: %w", err)
	}
	// The next pass finds this version in the cache, or reads past it.
	r.seen.saw(s.wr)
	s.before = s.wr.DeepCopy()
	return nil
}

// checkpoint writes the status in the middle of a pass, where what it holds
// must be durable before the pass goes on: why names the moment (the
// originals before the first change, a round's result before its reports are
// deleted).
func (r *Reconciler) checkpoint(ctx context.Context, s *scope, why string) error {
	if err := r.persist(ctx, s); err != nil {
		return fmt.Errorf("saving the status before %s: %w", why, err)
	}
	return nil
}

// FieldOwner is winready's field manager name in managedFields.
const FieldOwner = "winready"

// Defaults of the Options a caller leaves at zero.
const (
	// DefaultPreflightRetry is how often a failed preflight is looked at again
	// when neither the spec nor a watched object changes.
	DefaultPreflightRetry = 5 * time.Minute
	// DefaultRetryBase and DefaultRetryMax bound the workqueue's backoff after
	// a failed read or write: doubling from the base, capped at the maximum.
	DefaultRetryBase = 500 * time.Millisecond
	DefaultRetryMax  = time.Minute
)

// Options are the settings of the reconciler. main.go, the test kit and the
// suites all pass theirs to Setup.
type Options struct {
	// Namespace is the operator's namespace, where the originals are recorded.
	Namespace string
	// ProbeNamespace is where the node rounds run (config/probe);
	// round.DefaultNamespace when empty.
	ProbeNamespace string
	// ProbeImage is the image of the probe agents: the operator's own.
	ProbeImage string
	// Clock is the real clock when nil.
	Clock clock.PassiveClock
	// PreflightRetry, RetryBase and RetryMax override the defaults (tests
	// shorten them).
	PreflightRetry time.Duration
	RetryBase      time.Duration
	RetryMax       time.Duration
}

// withDefaults fills what o leaves at zero.
func (o Options) withDefaults() Options {
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&o.PreflightRetry, DefaultPreflightRetry)
	set(&o.RetryBase, DefaultRetryBase)
	set(&o.RetryMax, DefaultRetryMax)
	if o.ProbeNamespace == "" {
		o.ProbeNamespace = round.DefaultNamespace
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// backoff is the wait the workqueue's rate limiter puts before the next try
// after failures failed tries in a row: what ItemExponentialFailureRateLimiter
// computes, so that the status can say when that is.
func (o Options) backoff(failures int) time.Duration {
	d := o.RetryBase
	for i := 0; i < failures && d < o.RetryMax; i++ {
		d *= 2
	}
	return min(d, o.RetryMax)
}

// readers are where the steps read: the cache, and the API server past it.
func (r *Reconciler) readers() phase.Readers {
	return phase.Readers{Cache: r.Client, API: r.APIReader}
}
