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
// two steps: winready's own writes in between (its status, the hold) and the
// simulator's writes that are not reports (a Node) are never paired, the
// first change is not paired, and the second change of a batch is not either.
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
	}
	events[8].ObjectRef.Namespace = "tigera-operator"
	got := eventToPatch(events)
	want := []time.Duration{199 * time.Millisecond, 19 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("eventToPatch = %v, want %v", got, want)
	}
}
