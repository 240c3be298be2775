package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/windows"
)

// recorded is the note of the one Event the fake recorder holds.
func recorded(t *testing.T, rec *events.FakeRecorder, prefix string) string {
	t.Helper()
	select {
	case e := <-rec.Events:
		note, ok := strings.CutPrefix(e, prefix)
		if !ok {
			t.Fatalf("event %q does not start with %q", e, prefix)
		}
		return note
	default:
		t.Fatal("no event recorded")
		return ""
	}
}

func TestEventNotesStayWithinTheEventsAPILimit(t *testing.T) {
	rec := events.NewFakeRecorder(2)
	r := &Reconciler{Recorder: rec}
	p := &scope{wr: &v1alpha1.WindowsReadiness{}}

	pairs := strings.Repeat("linux-0->linux-1 ", 200)
	p.note(corev1.EventTypeWarning, "ProbeFailed", "Probe", "pairs failing: %s", pairs)
	r.recordEvents(p)
	note := recorded(t, rec, "Warning ProbeFailed ")
	if len(note) > 1024 {
		t.Fatalf("note of %d bytes, events.k8s.io/v1 refuses more than 1024", len(note))
	}
	if !strings.HasPrefix(note, "pairs failing: linux-0->linux-1") || !strings.Contains(note, "more characters)") {
		t.Fatalf("note %q does not keep its start and say how much was cut", note)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("w", 253)}}
	nodeNotJoined(p, node, v1alpha1.WindowsNodeJoin{WaitingFor: strings.Repeat("calico-node-windows pod ", 50)}, time.Minute)
	r.recordEvents(p)
	if note := recorded(t, rec, "Warning "+windows.ReasonNotJoined+" "); len(note) > 1024 {
		t.Fatalf("not-joined note of %d bytes", len(note))
	}

	p.note(corev1.EventTypeNormal, "Probe", "Probe", "round %s: %d of %d pairs passed", "r1", 6, 6)
	r.recordEvents(p)
	if note := recorded(t, rec, "Normal Probe "); note != "round r1: 6 of 6 pairs passed" {
		t.Fatalf("a short note is changed: %q", note)
	}
}
