package controllers

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// passOver is a scope over a WindowsReadiness with the given steps' states.
func passOver(steps ...v1alpha1.StepStatus) *scope {
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name, Generation: 1}}
	wr.Status.Steps = steps
	return &scope{wr: wr, before: wr.DeepCopy()}
}

func TestTheRollbackGuard(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   []string
		steps   []v1alpha1.StepStatus
		reason  string
		message string
		allowed metav1.ConditionStatus
	}{
		{"no Windows node: the rollback goes on", nil, nil, "", "", metav1.ConditionTrue},
		{"a Windows node before the first change: refused", []string{"win-1"}, nil,
			conditions.ReasonWindowsNodesPresent, "rollback refused, nothing was changed by it: Windows nodes have joined (win-1)", metav1.ConditionFalse},
		{"a Windows node midway: stopped between two steps", []string{"win-1"},
			[]v1alpha1.StepStatus{{Name: v1alpha1.StepWindowsDataplane, State: v1alpha1.StepReverted}},
			conditions.ReasonWindowsNodesPresent, "the rollback stopped between two steps", metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := passOver(tc.steps...)
			s.windowsNodes = tc.nodes
			o := rollbackGuard{&Reconciler{}}.reconcile(context.Background(), s)
			if o.Reason != tc.reason || !strings.Contains(o.Message, tc.message) {
				t.Errorf("outcome %q: %q, want %q with %q", o.Reason, o.Message, tc.reason, tc.message)
			}
			if c := meta.FindStatusCondition(s.wr.Status.Conditions, conditions.RollbackAllowed); c == nil || c.Status != tc.allowed {
				t.Errorf("RollbackAllowed %+v, want %s", c, tc.allowed)
			}
		})
	}
}
