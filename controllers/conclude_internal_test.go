package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
)

// concluded is a pass that stopped on o, concluded.
type concluded struct {
	s      *scope
	rec    *events.FakeRecorder
	result reconcile.Result
	err    error
}

func conclusion(t *testing.T, o Outcome, failures int, before ...metav1.Condition) concluded {
	t.Helper()
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name, Generation: 2}}
	wr.Status.Conditions = before
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: rec, Clock: clock, opts: Options{}.withDefaults()}
	s := &scope{wr: wr, before: wr.DeepCopy(), now: clock.Now(), failures: failures}
	result, err := r.conclude(context.Background(), s, o)
	return concluded{s: s, rec: rec, result: result, err: err}
}

// summary is Stalled, Reconciling and Ready, as T, F or U, and their reason.
func (c concluded) summary() string {
	var b strings.Builder
	reason := ""
	for _, typ := range []string{conditions.Stalled, conditions.Reconciling, conditions.Ready} {
		cond := meta.FindStatusCondition(c.s.wr.Status.Conditions, typ)
		if cond == nil {
			b.WriteString("-")
			continue
		}
		b.WriteString(string(cond.Status)[:1])
		reason = cond.Reason
	}
	return b.String() + " " + reason
}

func (c concluded) events() []string {
	var got []string
	for {
		select {
		case e := <-c.rec.Events:
			got = append(got, e)
		default:
			return got
		}
	}
}

func TestConcludeDecidesByTheCatalogue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       Outcome
		summary string
		event   string
	}{
		{"a wait for Calico", Outcome{Reason: conditions.ReasonWaitingForCalico, Step: v1alpha1.StepBGP, Message: "waiting for calico-node"},
			"FTF WaitingForCalico", ""},
		{"progress", progressing(time.Second, "probing"), "FTF Progressing", ""},
		{"a hold the spec asked for", stop(conditions.ReasonPaused, "paused"), "FTF Paused", ""},
		{"a stall", stop(conditions.ReasonPreflightFailed, "preflight failed"), "TFF PreflightFailed", "Warning PreflightFailed preflight failed"},
		{"the end of the migration", stop(conditions.ReasonMigrated, "ready"), "FFT Migrated", "Normal Migrated ready"},
		{"a dry run", stop(conditions.ReasonDryRun, "planned"), "FFF DryRun", ""},
		{"a reason the catalogue does not know", stop("SomethingNew", "?"), "TFF SomethingNew", "Warning SomethingNew ?"},
		{"a reverted step's revert under way", stop(conditions.ReasonRevertingStep, "reverting"), "FTF RevertingStep", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := conclusion(t, tc.o, 0)
			if got := c.summary(); got != tc.summary {
				t.Errorf("Stalled, Reconciling, Ready: %s, want %s", got, tc.summary)
			}
			events := c.events()
			switch {
			case tc.event == "" && len(events) > 0:
				t.Errorf("events %q, want none", events)
			case tc.event != "" && (len(events) != 1 || events[0] != tc.event):
				t.Errorf("events %q, want %q", events, tc.event)
			}
			if c.s.wr.Status.Message != tc.o.Message && tc.o.Step == "" {
				t.Errorf("message %q, want %q", c.s.wr.Status.Message, tc.o.Message)
			}
		})
	}
}

func TestAStallIsAnnouncedOnce(t *testing.T) {
	stalled := metav1.Condition{Type: conditions.Stalled, Status: metav1.ConditionTrue, Reason: conditions.ReasonPreflightFailed}
	c := conclusion(t, stop(conditions.ReasonPreflightFailed, "still failing"), 0, stalled)
	if events := c.events(); len(events) != 0 {
		t.Errorf("events %q for a stall already reported", events)
	}
}

func TestATransientErrorGoesToTheRateLimiterAndSaysWhen(t *testing.T) {
	err := apierrors.NewInternalError(errors.New("etcd is slow"))
	c := conclusion(t, failed(err), 3)
	if !errors.Is(c.err, err) || c.result.RequeueAfter != 0 {
		t.Fatalf("returned %v, %v: want the error itself, for the workqueue to back off", c.result, c.err)
	}
	if got := c.summary(); got != "FTF RetryingAfterError" {
		t.Errorf("summary %s", got)
	}
	// The rate limiter waits base * 2^3 after three failures.
	if msg := c.s.wr.Status.Message; !strings.Contains(msg, "retrying at 2026-01-01T00:00:04Z (in 4s, attempt 4)") {
		t.Errorf("message %q does not say when the next try is", msg)
	}
}

func TestARefusalStallsAfterAFewTries(t *testing.T) {
	refused := apierrors.NewForbidden(schema.GroupResource{Group: "operator.tigera.io", Resource: "installations"}, "default",
		errors.New("a policy denies it"))
	c := conclusion(t, failed(refused), 0)
	if got := c.summary(); got != "FTF RetryingAfterError" || errors.Is(c.err, reconcile.TerminalError(nil)) {
		t.Errorf("first refusal: %s, %v; want a retry", got, c.err)
	}
	c = conclusion(t, failed(refused), permanentAfter-1)
	if got := c.summary(); got != "TFF RefusedByAPIServer" {
		t.Errorf("refusal %d: %s, want a stall", permanentAfter, got)
	}
	if !errors.Is(c.err, reconcile.TerminalError(nil)) {
		t.Errorf("returned %v: want a terminal error, not retried by the workqueue", c.err)
	}
	if msg := c.s.wr.Status.Message; !strings.Contains(msg, "a policy denies it") {
		t.Errorf("message %q lacks the server's words", msg)
	}
	stalled := metav1.Condition{Type: conditions.Stalled, Status: metav1.ConditionTrue, Reason: conditions.ReasonRefusedByAPIServer}
	if c := conclusion(t, failed(refused), 0, stalled); c.summary() != "TFF RefusedByAPIServer" {
		t.Errorf("a refusal after a refusal stall: %s, want the stall at once", c.summary())
	}
}

func TestBackoffIsTheRateLimiters(t *testing.T) {
	o := Options{RetryBase: 500 * time.Millisecond, RetryMax: time.Minute}
	for failures, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second} {
		if got := o.backoff(failures); got != want {
			t.Errorf("after %d failures: %s, want %s", failures, got, want)
		}
	}
	if got := o.backoff(20); got != time.Minute {
		t.Errorf("capped at %s, want a minute", got)
	}
}

func TestSequenceStopsAtTheFirstOutcomeNotDone(t *testing.T) {
	var ran []string
	sub := func(name string, o Outcome) subReconciler {
		return subFunc(func(context.Context, *scope) Outcome { ran = append(ran, name); return o })
	}
	o := sequence(context.Background(), &scope{},
		sub("hold", Outcome{After: 5 * time.Second}),
		sub("preflight", done()),
		sub("probe", progressing(time.Minute, "probing")),
		sub("walk", done()))
	if strings.Join(ran, ",") != "hold,preflight,probe" {
		t.Errorf("ran %v", ran)
	}
	if o.Reason != conditions.ReasonProgressing || o.After != 5*time.Second {
		t.Errorf("outcome %+v: want the probe's, looking again at the hold's earlier time", o)
	}
}

func TestALostRaceIsRequeuedAtOnceNeverRefusedNorReported(t *testing.T) {
	guard := fmt.Errorf("step BGP: %w", fmt.Errorf("%w: %w", calico.ErrGuardFailed,
		apierrors.NewInvalid(schema.GroupKind{Group: "operator.tigera.io", Kind: "Installation"}, "default", nil)))
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "calico-node", errors.New("modified"))
	for _, err := range []error{guard, conflict} {
		for failures := range permanentAfter + 1 {
			c := conclusion(t, failed(err), failures)
			if c.err != nil || c.result.RequeueAfter != lostRaceRetry {
				t.Errorf("%v after %d failures: %v, %v; want a requeue at once and no error", err, failures, c.result, c.err)
			}
			if got := c.summary(); got != "--- " {
				t.Errorf("%v after %d failures: summary %s, want the status untouched", err, failures, got)
			}
		}
	}
}
