package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/phase"
)

// stepBook keeps status.steps: each step's state, when it started and
// finished, whether winready changed anything, and its Events.
type stepBook struct{ s *scope }

func (s *scope) steps() stepBook { return stepBook{s} }

// find returns the status record of a step; nil when the status has none.
func (b stepBook) find(name v1alpha1.StepName) *v1alpha1.StepStatus {
	st := &b.s.wr.Status
	for i := range st.Steps {
		if st.Steps[i].Name == name {
			return &st.Steps[i]
		}
	}
	return nil
}

// entry returns the status record of a step the pass writes, adding it,
// pending, when the status has none.
func (b stepBook) entry(name v1alpha1.StepName) *v1alpha1.StepStatus {
	if rec := b.find(name); rec != nil {
		return rec
	}
	st := &b.s.wr.Status
	st.Steps = append(st.Steps, v1alpha1.StepStatus{Name: name, State: v1alpha1.StepPending})
	return &st.Steps[len(st.Steps)-1]
}

// state is a step's state as the status records it; pending when absent.
func (b stepBook) state(name v1alpha1.StepName) v1alpha1.StepState {
	if rec := b.find(name); rec != nil {
		return rec.State
	}
	return v1alpha1.StepPending
}

// reset lists every step as pending, in order.
func (b stepBook) reset(steps []phase.Step) {
	b.s.wr.Status.Steps = nil
	for _, st := range steps {
		b.entry(st.Name())
	}
}

// stepState is the state a step is in while busy, or once done, in direction dir.
func stepState(dir v1alpha1.Direction, done bool) v1alpha1.StepState {
	switch {
	case dir == v1alpha1.DirectionRollback && done:
		return v1alpha1.StepReverted
	case dir == v1alpha1.DirectionRollback:
		return v1alpha1.StepReverting
	case done:
		return v1alpha1.StepCompleted
	}
	return v1alpha1.StepInProgress
}

func (b stepBook) start(name v1alpha1.StepName, dir v1alpha1.Direction) {
	step := b.entry(name)
	state := stepState(dir, false)
	if step.State == state {
		return
	}
	now := metav1.NewTime(b.s.now)
	step.State, step.StartedAt, step.FinishedAt, step.Changed = state, &now, nil, false
	b.s.note(corev1.EventTypeNormal, conditions.ReasonStepStarted, string(name), "%s %s", stateVerb(dir), name)
}

// finished reports whether the status records the step as done in direction dir.
func (b stepBook) finished(name v1alpha1.StepName, dir v1alpha1.Direction) bool {
	return b.state(name) == stepState(dir, true)
}

func (b stepBook) markChanged(name v1alpha1.StepName) { b.entry(name).Changed = true }

func (b stepBook) finish(name v1alpha1.StepName, dir v1alpha1.Direction) {
	step := b.entry(name)
	state := stepState(dir, true)
	if step.State == state {
		return
	}
	now := metav1.NewTime(b.s.now)
	if step.StartedAt == nil {
		step.StartedAt = &now
	}
	step.State, step.FinishedAt = state, &now
	step.Target = targetDigest(b.s.wr.Status.Targets, name, dir)
	step.Message = "already in place"
	if step.Changed {
		step.Message = "changed and applied by Calico"
		metrics.ObserveStep(name, dir, step.FinishedAt.Sub(step.StartedAt.Time))
	}
	b.s.note(corev1.EventTypeNormal, conditions.ReasonStepFinished, string(name), "%s %s: %s", stateVerb(dir), name, step.Message)
}

func stateVerb(dir v1alpha1.Direction) string {
	if dir == v1alpha1.DirectionRollback {
		return "reverting"
	}
	return "migrating"
}

// lastChange is the step winready changed most recently, nil when none.
func (b stepBook) lastChange() *v1alpha1.StepStatus {
	var last *v1alpha1.StepStatus
	for i := range b.s.wr.Status.Steps {
		st := &b.s.wr.Status.Steps[i]
		if st.Changed && st.StartedAt != nil && (last == nil || !st.StartedAt.Before(last.StartedAt)) {
			last = st
		}
	}
	return last
}

// targetDigest names the target a step applies toward dir, for the steps
// whose target comes from the spec; "" for the others.
func targetDigest(t *v1alpha1.Targets, name v1alpha1.StepName, dir v1alpha1.Direction) string {
	if dir == v1alpha1.DirectionRollback || t == nil {
		return ""
	}
	var target string
	switch name {
	case v1alpha1.StepServicesEndpoint:
		target = t.APIServerHost + ":" + t.APIServerPort
	case v1alpha1.StepServiceCIDRs:
		target = strings.Join(t.ServiceCIDRs, ",")
	default:
		return ""
	}
	sum := sha256.Sum256([]byte(target))
	return hex.EncodeToString(sum[:8])
}
