package controllers

import (
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/record"
)

// scope is one pass over the WindowsReadiness: the object, what the pass
// read once, and the clock. Each field says who fills it; every
// sub-reconciler reads the scope and writes only its own part of the status.
type scope struct {
	// wr is the object the pass reconciles (Reconcile). Sub-reconcilers fill
	// its status; only conclude sets Ready, Reconciling and Stalled.
	wr *v1alpha1.WindowsReadiness
	// before is the status as last written, to patch only what changed
	// (Reconcile, and each checkpoint).
	before *v1alpha1.WindowsReadiness
	// fresh says the pass read the object past the cache (Reconcile); the
	// record is then read again too (loadRecord).
	fresh bool
	// now is the pass's reading of the clock (Reconcile).
	now time.Time
	// record is the durable record of the originals as the pass read it,
	// nil when there is none (readRecord); adopted says whether the pass
	// may go on from it.
	record *record.Record
	// inst is Installation default as the pass found it (Reconcile).
	inst *operatorv1.Installation
	// windowsNodes are the Windows nodes, from the cache (observe); a rollback
	// reads them again past the cache before each write (walk).
	windowsNodes []string
	// calico is Calico's health and the overlay's conflicts (observe).
	calico calicoHealth
	// cluster is what the steps read, nil before the walk (walk).
	cluster *calico.Cluster
	// failures is how often the passes before this one failed in a row, as
	// the workqueue's rate limiter counts them (Reconcile).
	failures int
	// events are the Events of the pass, recorded by conclude.
	events []passEvent
}

// calicoHealth is what the pass read of the Tigera operator's own status.
type calicoHealth struct {
	// degraded is the first Degraded TigeraStatus, nil when Calico is healthy.
	degraded *calico.Health
	// operatorDegraded are the Degraded TigeraStatuses a wait reports,
	// calico-windows included.
	operatorDegraded []calico.Health
	// overlayConflicts are the fields of Installation overlay that win over
	// what winready writes.
	overlayConflicts []calico.OverlayField
	// overlay is Installation overlay, nil when absent.
	overlay *operatorv1.Installation
	// read are the TigeraStatuses observe read, by name: the steps start
	// from them and read none twice in a pass. nil when observe did not
	// get that far.
	read map[string]calico.Health
	// verdict is what a change decided while Calico is Degraded means,
	// for CalicoHealthy's message (walk); "" when no change was decided.
	verdict string
}

// passEvent is an Event the pass records about the WindowsReadiness, and the
// object it relates to, if any.
type passEvent struct {
	eventType, reason, action, note string
	related                         runtime.Object
}

// set sets a condition that describes the cluster (PreflightPassed,
// CalicoHealthy, ...) at the object's generation. Ready, Reconciling and
// Stalled are conclude's alone.
func (s *scope) set(typ string, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(s.wr, typ, status, reason, message)
}

// note adds an Event to the pass; reason is a reason of the conditions
// catalogue.
func (s *scope) note(eventType, reason, action, format string, args ...any) {
	s.events = append(s.events, passEvent{eventType: eventType, reason: reason, action: action, note: eventNote(format, args...)})
}

// stalled is the Stalled condition of the status as last written, nil
// unless it stalls.
func (s *scope) stalled() *metav1.Condition {
	c := meta.FindStatusCondition(s.before.Status.Conditions, conditions.Stalled)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

// alreadyStalled says whether the status as last written stalls on reason.
func (s *scope) alreadyStalled(reason string) bool {
	c := s.stalled()
	return c != nil && c.Reason == reason
}

// conditionOf is the object's condition of type typ, nil when unset.
func conditionOf(s *scope, typ string) *metav1.Condition {
	return meta.FindStatusCondition(s.wr.Status.Conditions, typ)
}
