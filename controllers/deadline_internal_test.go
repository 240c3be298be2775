package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
)

// rolloutAt is calico-node updated on n of 1,000 nodes.
func rolloutAt(n int32) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet, Generation: 3},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 1000, UpdatedNumberScheduled: n,
			NumberAvailable: 999, NumberUnavailable: 1}}
}

// waiting is a pass waiting at step BGP, and the function that concludes it
// on what the step waits for, as the clock says now.
type waiting struct {
	*scope
	r     *Reconciler
	clock *clocktesting.FakeClock
}

func waitingPass(clock *clocktesting.FakeClock, deadline time.Duration) *waiting {
	wr := &v1alpha1.WindowsReadiness{Spec: v1alpha1.WindowsReadinessSpec{ProgressDeadline: &metav1.Duration{Duration: deadline}}}
	s := &scope{wr: wr, before: wr.DeepCopy(), now: clock.Now(), cluster: &calico.Cluster{}}
	s.steps().start(v1alpha1.StepBGP, v1alpha1.DirectionMigrate)
	return &waiting{scope: s, r: &Reconciler{Clock: clock, opts: Options{}.withDefaults()}, clock: clock}
}

// wait concludes a pass that waits for what, at step BGP.
func (w *waiting) wait(what string) ctrl.Result {
	w.now = w.clock.Now()
	result, _ := w.r.conclude(context.Background(), w.scope, Outcome{Reason: conditions.ReasonWaitingForCalico, Step: v1alpha1.StepBGP, Message: what})
	return result
}

// TestSlowRolloutNeverStalls follows a rollout that takes 20 times the
// progress deadline in all but moves a node every half deadline.
func TestSlowRolloutNeverStalls(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := waitingPass(clock, time.Minute)
	for n := int32(0); n < 40; n++ {
		p.cluster.Node = rolloutAt(n)
		_, why := calico.RolloutDone(p.cluster.Node)
		result := p.wait("step 3/6 (BGP): waiting for " + why)
		if conditions.IsTrue(p.wr, conditions.Stalled) {
			t.Fatalf("stalled after %d nodes, %s in: %s", n, clock.Since(p.wr.Status.Steps[0].StartedAt.Time), p.wr.Status.Message)
		}
		if result.RequeueAfter <= 0 || result.RequeueAfter > time.Minute {
			t.Fatalf("looks again after %s, want within the deadline", result.RequeueAfter)
		}
		clock.Step(30 * time.Second)
	}
	if msg := p.wr.Status.Message; !strings.Contains(msg, "39/1000 updated, about") || !strings.Contains(msg, "left") {
		t.Errorf("no pace or time left in %q", msg)
	}
	if st := p.wr.Status.Rollout; st == nil || st.EstimatedTimeLeft == nil || st.Updated != 39 {
		t.Errorf("status.rollout %+v", st)
	}
}

// TestStuckRolloutStalls stalls once nothing moved for the deadline, naming
// what the step waited for, though the step began long before.
func TestStuckRolloutStalls(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := waitingPass(clock, time.Minute)
	wait := func(n int32) {
		p.cluster.Node = rolloutAt(n)
		_, why := calico.RolloutDone(p.cluster.Node)
		p.wait("step 3/6 (BGP): waiting for " + why)
	}
	wait(10)
	clock.Step(50 * time.Second)
	wait(11)
	clock.Step(59 * time.Second)
	wait(11)
	if conditions.IsTrue(p.wr, conditions.Stalled) {
		t.Fatalf("stalled 59s after the last progress: %s", p.wr.Status.Message)
	}
	clock.Step(2 * time.Second)
	wait(11)
	c := conditions.Stalled
	if !conditions.IsTrue(p.wr, c) {
		t.Fatalf("not stalled 61s after the last progress")
	}
	msg := p.wr.Status.Message
	for _, want := range []string{"calico-node rollout (11 of 1000 updated, 999 available)", "no progress for 1m1s",
		"progress deadline 1m0s"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
}
