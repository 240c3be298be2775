package calicosim

import (
	"context"
	"fmt"
	"strings"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// statusManager imitates one of the operator's status managers (pkg/controller/status): a controller tells it
// what it found (Installation present, degraded with a reason, ready to monitor some DaemonSets), and the manager
// turns that plus the DaemonSets' rollout state into the TigeraStatus conditions Available, Progressing and
// Degraded. The real manager rewrites the object every 5 s; this one writes a change once it has waited
// Options.StatusLag, so the status lags the cluster as it does in a real one.
type statusManager struct {
	name string

	// installUID resets the manager when a new Installation appears (after Clean and Seed), so no state from an
	// earlier cluster leaks into the next test.
	installUID types.UID
	// enabled is the operator's OnCRFound: nothing is written before a controller has seen its Installation.
	enabled bool
	// readyToMonitor is set once a reconcile got through to the end; before that only Degraded is reported.
	readyToMonitor bool
	// observedGeneration is the Installation generation the controller last acted on (SetMetaData); 0 for
	// controllers that never call SetMetaData, such as the Windows one.
	observedGeneration int64
	degraded           *degradation
	daemonSets         []types.NamespacedName

	// pendingSince is when the conditions first differed from the stored ones, zero when they agree.
	pendingSince time.Time
	// resuming is set until the first look at the stored TigeraStatus after a new Installation appeared.
	resuming bool
}

type degradation struct {
	reason  operatorv1.TigeraStatusReason
	message string
}

// health is what the manager learnt from the objects it monitors.
type health struct {
	progressing []string
	failing     []string
}

func newStatusManager(name string) statusManager { return statusManager{name: name} }

// found is the operator's OnCRFound, plus the reset for a new Installation.
func (m *statusManager) found(inst *operatorv1.Installation) {
	if inst.UID != m.installUID {
		*m = statusManager{name: m.name, installUID: inst.UID, resuming: true}
	}
	m.enabled = true
}

// notFound forgets everything. Unlike the real operator it does not delete the TigeraStatus: Clean does that,
// and a deletion here could race with the next Seed.
func (m *statusManager) notFound() { *m = statusManager{name: m.name} }

// setDegraded formats the message as the operator's SetDegraded does: "msg: err".
func (m *statusManager) setDegraded(reason operatorv1.TigeraStatusReason, msg string, err error) {
	if err != nil {
		msg = fmt.Sprintf("%s: %s", msg, err.Error())
	}
	m.degraded = &degradation{reason: reason, message: msg}
}

func (m *statusManager) clearDegraded() { m.degraded = nil }

// available is the operator's IsAvailable.
func (m *statusManager) available(h health) bool {
	return m.readyToMonitor && m.degraded == nil && len(h.failing) == 0 && len(h.progressing) == 0
}

// conditions computes what the TigeraStatus should say, starting from what it says now, the way the operator's
// updateStatus does (including which conditions it leaves alone before ReadyToMonitor).
func (m *statusManager) conditions(current []operatorv1.TigeraStatusCondition, h health, now time.Time) []operatorv1.TigeraStatusCondition {
	var set []operatorv1.TigeraStatusCondition
	switch {
	case m.readyToMonitor:
		set = m.monitoredConditions(h)
	case m.degraded != nil:
		set = append(set, tigeraCondition(operatorv1.ComponentDegraded, operatorv1.ConditionTrue, string(m.degraded.reason), m.degraded.message))
	default:
		set = append(set, tigeraCondition(operatorv1.ComponentDegraded, operatorv1.ConditionFalse, reasonUnknown, ""))
	}

	out := append([]operatorv1.TigeraStatusCondition(nil), current...)
	for _, c := range set {
		if m.observedGeneration != 0 {
			c.ObservedGeneration = m.observedGeneration
		}
		c.LastTransitionTime = metav1.NewTime(now)
		replaced := false
		for i := range out {
			if out[i].Type != c.Type {
				continue
			}
			if out[i].Status == c.Status {
				c.LastTransitionTime = out[i].LastTransitionTime
			}
			out[i] = c
			replaced = true
		}
		if !replaced {
			out = append(out, c)
		}
	}
	return out
}

// monitoredConditions are Available, Progressing and Degraded once the
// operator monitors the component's objects.
func (m *statusManager) monitoredConditions(h health) []operatorv1.TigeraStatusCondition {
	available := m.available(h)
	progressing := len(h.progressing) != 0 && len(h.failing) == 0
	isDegraded := m.degraded != nil || len(h.failing) != 0
	var set []operatorv1.TigeraStatusCondition
	switch {
	case available:
		set = append(set, tigeraCondition(operatorv1.ComponentAvailable, operatorv1.ConditionTrue, string(operatorv1.AllObjectsAvailable), allObjectsAvailableMsg))
	default:
		set = append(set, tigeraCondition(operatorv1.ComponentAvailable, operatorv1.ConditionFalse, reasonUnknown, ""))
	}
	switch {
	case progressing:
		set = append(set, tigeraCondition(operatorv1.ComponentProgressing, operatorv1.ConditionTrue, string(operatorv1.ResourceNotReady), strings.Join(h.progressing, "\n")))
	case available:
		set = append(set, tigeraCondition(operatorv1.ComponentProgressing, operatorv1.ConditionFalse, string(operatorv1.AllObjectsAvailable), allObjectsAvailableMsg))
	default:
		set = append(set, tigeraCondition(operatorv1.ComponentProgressing, operatorv1.ConditionFalse, reasonUnknown, ""))
	}
	switch {
	case isDegraded:
		set = append(set, tigeraCondition(operatorv1.ComponentDegraded, operatorv1.ConditionTrue, string(m.degradedReason(h)), m.degradedMessage(h)))
	case available:
		set = append(set, tigeraCondition(operatorv1.ComponentDegraded, operatorv1.ConditionFalse, string(operatorv1.AllObjectsAvailable), allObjectsAvailableMsg))
	default:
		set = append(set, tigeraCondition(operatorv1.ComponentDegraded, operatorv1.ConditionFalse, reasonUnknown, ""))
	}
	return set
}

func tigeraCondition(t operatorv1.StatusConditionType, s operatorv1.ConditionStatus, reason, msg string) operatorv1.TigeraStatusCondition {
	return operatorv1.TigeraStatusCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

func (m *statusManager) degradedReason(h health) operatorv1.TigeraStatusReason {
	if m.degraded != nil {
		return m.degraded.reason
	}
	if len(h.failing) != 0 {
		return operatorv1.PodFailure
	}
	return operatorv1.Unknown
}

func (m *statusManager) degradedMessage(h health) string {
	var msgs []string
	if m.degraded != nil && m.degraded.message != "" {
		msgs = append(msgs, m.degraded.message)
	}
	return strings.Join(append(msgs, h.failing...), "\n")
}

// syncStatus brings TigeraStatus m.name in line with what m says, once the difference has waited StatusLag. It
// returns how long to wait before the next look while a change is pending.
func (s *Simulator) syncStatus(ctx context.Context, m *statusManager, h health) (time.Duration, error) {
	if !m.enabled {
		return 0, nil
	}
	ts := &operatorv1.TigeraStatus{}
	err := s.reader.Get(ctx, types.NamespacedName{Name: m.name}, ts)
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return 0, err
	}
	if m.resuming {
		// The simulator stands for an operator that has been running all along (Seed writes what its earlier
		// run left). Only a manager that reached ReadyToMonitor ever writes Available, so a stored Available
		// condition means that run got there, and this one carries on from that point instead of starting cold.
		m.resuming = false
		for _, c := range ts.Status.Conditions {
			if c.Type == operatorv1.ComponentAvailable {
				m.readyToMonitor = true
			}
		}
	}
	now := s.opts.Clock.Now()
	want := m.conditions(ts.Status.Conditions, h, now)
	if !missing && equality.Semantic.DeepEqual(ts.Status.Conditions, want) {
		m.pendingSince = time.Time{}
		return 0, nil
	}
	if s.opts.StatusLag > 0 {
		if m.pendingSince.IsZero() {
			m.pendingSince = now
			return s.opts.StatusLag, nil
		}
		if wait := s.opts.StatusLag - now.Sub(m.pendingSince); wait > 0 {
			return wait, nil
		}
	}
	if missing {
		ts = &operatorv1.TigeraStatus{ObjectMeta: metav1.ObjectMeta{Name: m.name}}
		if err := s.create(ctx, ts); err != nil {
			return 0, err
		}
	}
	ts.Status.Conditions = want
	if err := s.updateStatus(ctx, ts); err != nil {
		return 0, err
	}
	m.pendingSince = time.Time{}
	return 0, nil
}

// daemonSetHealth is the DaemonSet part of the operator's syncState, with its messages.
func (s *Simulator) daemonSetHealth(ctx context.Context, names []types.NamespacedName) (health, error) {
	var h health
	for _, nn := range names {
		ds := &appsv1.DaemonSet{}
		if err := s.reader.Get(ctx, nn, ds); err != nil {
			if apierrors.IsNotFound(err) {
				h.failing = append(h.failing, fmt.Sprintf("DaemonSet %q not found", nn.String()))
				continue
			}
			return h, err
		}
		st := ds.Status
		switch {
		case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
			h.progressing = append(h.progressing, fmt.Sprintf("DaemonSet %q update is rolling out (%d out of %d updated)", nn.String(), st.UpdatedNumberScheduled, st.DesiredNumberScheduled))
		case st.NumberUnavailable > 0:
			h.progressing = append(h.progressing, fmt.Sprintf("DaemonSet %q is not available (awaiting %d nodes)", nn.String(), st.NumberUnavailable))
		case st.NumberAvailable == 0 && st.DesiredNumberScheduled != 0:
			h.progressing = append(h.progressing, fmt.Sprintf("DaemonSet %q is not yet scheduled on any nodes", nn.String()))
		case ds.Generation > st.ObservedGeneration:
			h.progressing = append(h.progressing, fmt.Sprintf("DaemonSet %q update is being processed (generation %d, observed generation %d)", nn.String(), ds.Generation, st.ObservedGeneration))
		}
	}
	return h, nil
}
