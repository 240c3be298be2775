package main

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// at builds an audit event of a write received at ms and done 1 ms later.
func at(ms int, user, agent, resource, subresource string) auditEvent {
	var ev auditEvent
	ev.Verb = "patch"
	ev.User.Username, ev.UserAgent = user, agent
	ev.ObjectRef.Resource, ev.ObjectRef.Subresource = resource, subresource
	ev.ResponseStatus.Code = 200
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev.Received = metav1.NewMicroTime(t0.Add(time.Duration(ms) * time.Millisecond))
	ev.Done = metav1.NewMicroTime(t0.Add(time.Duration(ms+1) * time.Millisecond))
	return ev
}

// TestEventToPatchPairsEachChangeWithTheReportBeforeIt is a small audit log of
// three steps: winready's own writes in between (its status, the hold) and
// the simulator's writes that are not reports (a Node) are never paired, the
// first change is not paired, nor the second change of a batch, and a report
// that ended while a change was in flight is not the one it answers.
func TestEventToPatchPairsEachChangeWithTheReportBeforeIt(t *testing.T) {
	const sim = simUserAgent + "/v0.0.0"
	events := []auditEvent{
		at(0, "admin", sim, "tigerastatuses", "status"),     // before the first change
		at(10, "winready", "winready", "installations", ""), // the first change: not paired
		at(20, "winready", "winready", "windowsreadinesses", "status"),
		at(100, "admin", sim, "installations", "status"), // Calico reports the first step
		at(150, "admin", sim, "nodes", ""),               // not a report
		at(160, "winready", "winready", "windowsreadinesses", "status"),
		at(170, "winready", "winready", "daemonsets", ""),          // the hold: not a Calico change counted
		at(300, "winready", "winready", "installations", ""),       // 199 ms after the report's end
		at(305, "winready", "winready", "configmaps", ""),          // a batch's second write: not paired
		at(400, "admin", sim, "daemonsets", "status"),              // the rollout done
		at(450, "admin", sim, "tigerastatuses", "status"),          // and reported
		at(452, "winready", "winready", "installations", "status"), // not a change
		at(470, "winready", "winready", "installations", ""),       // 19 ms after the last report's end
		at(600, "admin", sim, "daemonsets", "status"),              // the next report
		at(650, "winready", "winready", "installations", ""),       // received at 650, in flight until 660...
		at(655, "admin", sim, "tigerastatuses", "status"),          // ...while this report ends at 656
	}
	events[8].ObjectRef.Namespace = "tigera-operator"
	// The log is in the order requests completed: the change comes after
	// the report that ended while it was in flight.
	n := len(events)
	events[n-2].Done = metav1.NewMicroTime(events[n-2].Received.Add(10 * time.Millisecond))
	events[n-2], events[n-1] = events[n-1], events[n-2]
	got := eventToPatch(events)
	want := []time.Duration{199 * time.Millisecond, 19 * time.Millisecond, 49 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("eventToPatch = %v, want %v", got, want)
	}
}

func TestCanaryCostAddsTheCanarysNodesAtThePace(t *testing.T) {
	// 1,000 nodes at 10%: ten waves of 100 nodes; the canary's three nodes
	// one at a time add three paces of 27 s.
	if got, want := canaryCost(1000), "5m51s (+1m21s)"; got != want {
		t.Errorf("canaryCost(1000) = %q, want %q", got, want)
	}
	if got, want := canaryCost(5000), "5m51s (+1m21s)"; got != want {
		t.Errorf("canaryCost(5000) = %q, want %q", got, want)
	}
}
