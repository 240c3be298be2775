package controllers

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// calicoVerdict says whether a change of step toward dir may be made while
// Calico is unhealthy, and what CalicoHealthy says about it then ("" to keep
// it): a Degraded TigeraStatus means a change now could make things worse.
// When the Degraded state began after winready's own last change, the way out
// is through winready: a rollback, or a re-run of that step toward a
// corrected target, goes ahead (and says so). It decides on the health that
// observe read once for the pass.
func calicoVerdict(s *scope, step v1alpha1.StepName, dir v1alpha1.Direction) (Outcome, string) {
	h := s.calico.degraded
	if h == nil {
		return done(), ""
	}
	msg := fmt.Sprintf("TigeraStatus %s is Degraded (%s); no change is made until it recovers", h.Name, h.Message)
	if last := s.steps().lastChange(); last != nil && !h.DegradedSince.IsZero() && !h.DegradedSince.Before(last.StartedAt.Time) {
		switch {
		case dir == v1alpha1.DirectionRollback:
			return done(), fmt.Sprintf("TigeraStatus %s is Degraded (%s) since winready changed step %s: the rollback goes on to undo it",
				h.Name, h.Message, last.Name)
		case step == last.Name || sameWrite(s, step, last):
			return done(), fmt.Sprintf("TigeraStatus %s is Degraded (%s) since winready changed step %s: re-running it toward the corrected target",
				h.Name, h.Message, last.Name)
		}
		msg = fmt.Sprintf("TigeraStatus %s is Degraded (%s) since winready changed step %s; set spec.direction: Rollback to undo it, "+
			"or correct the spec so that step %s runs again", h.Name, h.Message, last.Name, last.Name)
	}
	if h.DegradedSince.IsZero() {
		return stop(conditions.ReasonCalicoDegraded, "%s", msg), msg
	}
	deadline := s.wr.Spec.EffectiveProgressDeadline()
	left := deadline - s.now.Sub(h.DegradedSince)
	if left <= 0 {
		return stop(conditions.ReasonStepTimeout, "%s; Degraded for longer than the step deadline %s", msg, deadline), msg
	}
	// Look again when the deadline falls due: a Degraded state that nothing
	// changes wakes no watch, and must still become a stall.
	return stop(conditions.ReasonCalicoDegraded, "%s", msg).lookAgain(left), msg
}

// calicoBlocked is the mayChange part of calicoVerdict.
func calicoBlocked(s *scope, step v1alpha1.StepName, dir v1alpha1.Direction) Outcome {
	o, _ := calicoVerdict(s, step, dir)
	return o
}

// sameWrite says whether step was changed in the same write as last: a
// batch starts every step it includes at one moment.
func sameWrite(s *scope, step v1alpha1.StepName, last *v1alpha1.StepStatus) bool {
	st := s.steps().find(step)
	return st != nil && st.Changed && st.StartedAt != nil && st.StartedAt.Equal(last.StartedAt) &&
		slices.Contains(batchable, step) && slices.Contains(batchable, last.Name)
}

// writeCalicoHealthy writes CalicoHealthy, its one writer, at the end of a
// pass that read Calico's health: False while a TigeraStatus is Degraded,
// with what that means for the change the walk decided on, or a message
// refined earlier in this state, else the Degraded one's own words.
func writeCalicoHealthy(s *scope) {
	h := s.calico
	switch {
	case h.read == nil:
		return
	case h.verdict != "":
		s.set(conditions.CalicoHealthy, metav1.ConditionFalse, conditions.ReasonCalicoDegraded, h.verdict)
	case h.degraded != nil:
		if c := conditionOf(s, conditions.CalicoHealthy); c == nil || c.Status != metav1.ConditionFalse {
			s.set(conditions.CalicoHealthy, metav1.ConditionFalse, conditions.ReasonCalicoDegraded,
				fmt.Sprintf("TigeraStatus %s is Degraded (%s)", h.degraded.Name, h.degraded.Message))
		}
	default:
		s.set(conditions.CalicoHealthy, metav1.ConditionTrue, conditions.ReasonAllComponentsHealthy, "no TigeraStatus is Degraded")
	}
}
