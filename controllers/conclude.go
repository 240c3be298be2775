package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/phase"
	"github.com/winready/winready/internal/rollout"
)

// conclude is the one writer of Ready, Reconciling and Stalled. It turns the
// outcome of a pass into those conditions, the message, the Events and the
// result, deciding between waiting, holding, stalling and completing by what
// the conditions catalogue says the outcome's reason means, never by who
// returned it.
func (r *Reconciler) conclude(ctx context.Context, s *scope, o Outcome) (ctrl.Result, error) {
	defer r.recordEvents(s)
	if o.Err != nil {
		if lostRace(o.Err) {
			// Someone wrote the object between this pass's read and its
			// write: nothing is wrong, and the next pass reads it anew. It
			// goes back to the queue past the rate limiter, which forgets it,
			// so a lost race is never counted towards a refusal or shown as
			// an error; the status keeps what the pass found.
			log.FromContext(ctx).V(1).Info("lost a race for an object, trying again", "error", o.Err.Error())
			return ctrl.Result{RequeueAfter: lostRaceRetry}, nil
		}
		return r.concludeError(ctx, s, o.Err)
	}
	if o.Done() {
		// Nothing stopped the pass: nothing to say about it.
		return r.result(o), nil
	}
	msg := o.Message
	switch conditions.EffectOf(o.Reason) {
	case conditions.Waits:
		if o.Step != "" && o.Reason == conditions.ReasonWaitingForCalico {
			return r.waitForCalico(ctx, s, o), nil
		}
		setSummary(s, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, o.Reason, msg)
	case conditions.Holds:
		setSummary(s, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, o.Reason, msg)
	case conditions.Completes:
		if c := meta.FindStatusCondition(s.wr.Status.Conditions, conditions.Ready); c == nil || c.Status != metav1.ConditionTrue ||
			c.Reason != o.Reason || c.ObservedGeneration != s.wr.Generation {
			s.note(corev1.EventTypeNormal, o.Reason, "Reconcile", "%s", msg)
		}
		setSummary(s, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, o.Reason, msg)
	case conditions.Rests:
		setSummary(s, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionFalse, o.Reason, msg)
	default:
		// Stalls, and any reason the catalogue does not know: a person looks.
		// A stall waits for a person; a sub-reconciler may still ask to look
		// again later (a failed preflight, every few minutes).
		r.stall(s, o.Reason, msg, string(o.Step))
	}
	return r.result(o), nil
}

// setSummary writes Stalled, Reconciling and Ready with one reason, and the
// message where kstatus readers look for it.
func setSummary(s *scope, stalled, reconciling, ready metav1.ConditionStatus, reason, msg string) {
	stalledMsg := ""
	if stalled == metav1.ConditionTrue {
		stalledMsg = msg
	}
	s.set(conditions.Stalled, stalled, reason, stalledMsg)
	s.set(conditions.Reconciling, reconciling, reason, msg)
	s.set(conditions.Ready, ready, reason, msg)
	s.wr.Status.Message = msg
}

// stall records that a person is needed, with a Warning Event when the stall
// is new: nothing more happens until the spec or a watched object changes.
func (r *Reconciler) stall(s *scope, reason, msg, action string) {
	if !s.alreadyStalled(reason) {
		if action == "" {
			action = "Reconcile"
		}
		s.note(corev1.EventTypeWarning, reason, action, "%s", msg)
	}
	setSummary(s, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, reason, msg)
}

// result is when to look again for an outcome that is not a stall.
func (r *Reconciler) result(o Outcome) ctrl.Result {
	return ctrl.Result{RequeueAfter: o.After}
}

// waitForCalico reports a step waiting for Calico and stalls it once what it
// waits for has not moved for longer than the progress deadline, as a
// Deployment's progressDeadlineSeconds does: a slow rollout that keeps moving
// never stalls. Progress is any change of what the step waits for (a node
// updated, a pod available, a TigeraStatus catching up). The result wakes the
// reconciler when the deadline falls due; events from watched objects wake it
// sooner.
func (r *Reconciler) waitForCalico(ctx context.Context, s *scope, o Outcome) ctrl.Result {
	msg := o.Message
	step := s.steps().entry(o.Step)
	if step.Message != msg || step.LastProgressAt == nil {
		at := metav1.NewTime(s.now)
		step.LastProgressAt = &at
	}
	step.Message = msg
	if pace := followRollout(s); pace != "" {
		msg += "; " + pace
	}
	// After the progress bookkeeping: the operator rewording its Degraded
	// message is not progress of the step.
	if says := operatorSays(s, msg); says != "" {
		msg += "; " + says
	}
	deadline := s.wr.Spec.EffectiveProgressDeadline()
	idle := s.now.Sub(step.LastProgressAt.Time)
	if idle >= deadline {
		r.stall(s, conditions.ReasonStepTimeout, fmt.Sprintf("%s: no progress for %s, longer than the progress deadline %s "+
			"(spec.progressDeadline). Check TigeraStatus and the calico-system pods; the step resumes by itself when Calico "+
			"moves again, or raise spec.progressDeadline, or set spec.direction: Rollback", msg, idle.Round(time.Second), deadline), string(o.Step))
		return ctrl.Result{}
	}
	setSummary(s, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, conditions.ReasonWaitingForCalico, msg)
	log.FromContext(ctx).V(1).Info("waiting", "step", o.Step, "for", msg)
	return r.result(o.lookAgain(deadline - idle))
}

// followRollout keeps status.rollout on calico-node's rollout while one runs,
// and says how far it is and how long it has left.
func followRollout(s *scope) string {
	if s.cluster == nil || s.cluster.Node == nil {
		return ""
	}
	st, _ := rollout.FromStatus(s.wr.Status.Rollout).Step(rollout.Observe(s.cluster.Node, s.now))
	s.wr.Status.Rollout = st.ToStatus()
	metrics.RecordRollout(s.wr.Status.Rollout)
	if st.Last.Done() {
		return ""
	}
	return "calico-node " + st.Message()
}

// operatorSays is the Tigera operator's own reason for a wait: the Degraded
// message of TigeraStatus calico, ippools and (once Windows is on)
// calico-windows, each one not already in msg, and the overlay's fields that
// win over Installation default; "" when there is none.
func operatorSays(s *scope, msg string) string {
	var parts []string
	for _, f := range s.calico.overlayConflicts {
		parts = append(parts, fmt.Sprintf("Installation overlay sets spec.%s: %s, which wins over Installation default; remove it from the overlay", f.Path, f.Value))
	}
	if s.cluster != nil {
		if pace := speed(s).OverlayPace(phase.Input{Cluster: s.cluster}); pace != "" {
			parts = append(parts, pace)
		}
	}
	for _, h := range s.calico.operatorDegraded {
		if h.Message != "" && strings.Contains(msg, h.Message) {
			continue
		}
		parts = append(parts, fmt.Sprintf("the Tigera operator reports TigeraStatus %s Degraded: %s", h.Name, h.Message))
	}
	return strings.Join(parts, "; ")
}

// concludeError reports a failed read or write. A transient failure is
// weather, not a verdict: the object keeps Reconciling, the status says what
// failed and when the next try is, and the error goes to the workqueue's rate
// limiter, which sets that time. A refusal (Forbidden, Invalid) that
// persists stalls with the server's own words and is not retried until the
// spec or a watched object changes.
func (r *Reconciler) concludeError(ctx context.Context, s *scope, err error) (ctrl.Result, error) {
	failures := s.failures
	if permanent(err) && (failures+1 >= permanentAfter || s.alreadyStalled(conditions.ReasonRefusedByAPIServer)) {
		msg := fmt.Sprintf("the API server refused a write %d times: %v. Fix what it names (winready's RBAC, an admission policy, "+
			"the object), then kubectl winready retry (a new value of annotation %s), or edit the WindowsReadiness", failures+1, err,
			v1alpha1.RetryAnnotation)
		r.stall(s, conditions.ReasonRefusedByAPIServer, msg, "")
		log.FromContext(ctx).Error(err, "refused for good, stalled")
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	after := r.opts.backoff(failures)
	at := s.now.Add(after)
	reason := conditions.ReasonRetryingAfterError
	msg := fmt.Sprintf("%v; retrying at %s (in %s, attempt %d)", err, at.UTC().Format(time.RFC3339), after.Round(time.Millisecond), failures+1)
	if apierrors.IsServiceUnavailable(err) {
		// A 503 from projectcalico.org/v3 is the Calico API server down: its
		// APIService says why, under a reason of its own.
		if why, rerr := calico.APIServiceUnavailable(ctx, r.APIReader); rerr == nil && why != "" {
			reason = conditions.ReasonCalicoAPIServerUnavailable
			msg = fmt.Sprintf("the Calico API server is unavailable: %s; projectcalico.org/v3 answers %v. Check TigeraStatus "+
				"apiserver and the calico-apiserver pods; retrying at %s (attempt %d)", why, err, at.UTC().Format(time.RFC3339), failures+1)
		}
	}
	setSummary(s, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, reason, bounded(msg))
	log.FromContext(ctx).Info("reconcile failed, retrying", "error", err.Error(), "after", after)
	return ctrl.Result{}, err
}

// lostRaceRetry is how soon a pass that lost a race runs again: at once,
// give or take the moment the cache needs to show the write that won.
const lostRaceRetry = 10 * time.Millisecond

// lostRace says whether err is a write that lost to another writer: a guard
// of an Installation or calico-node patch that no longer held (which the API
// server answers 422 Invalid), or an optimistic lock's 409 Conflict.
func lostRace(err error) bool {
	return errors.Is(err, calico.ErrGuardFailed) || apierrors.IsConflict(err)
}

// recordEvents records the Events of the pass.
func (r *Reconciler) recordEvents(s *scope) {
	if r.Recorder == nil {
		return
	}
	for _, e := range s.events {
		r.Recorder.Eventf(s.wr, e.related, e.eventType, e.reason, e.action, "%s", e.note)
	}
	s.events = nil
}
