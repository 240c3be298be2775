package controllers

import (
	"testing"

	"github.com/winready/winready/api/v1alpha1"
)

func TestFillColumns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		steps    []v1alpha1.StepStatus
		rollout  *v1alpha1.RolloutStatus
		step     v1alpha1.StepName
		progress string
	}{
		{"migrating", []v1alpha1.StepStatus{{Name: v1alpha1.StepStrictAffinity, State: v1alpha1.StepCompleted},
			{Name: v1alpha1.StepBGP, State: v1alpha1.StepInProgress}, {Name: v1alpha1.StepServiceCIDRs, State: v1alpha1.StepPending}},
			&v1alpha1.RolloutStatus{Updated: 2, Total: 5}, v1alpha1.StepBGP, "2/5"},
		{"rolling back", []v1alpha1.StepStatus{{Name: v1alpha1.StepBGP, State: v1alpha1.StepReverting}}, nil, v1alpha1.StepBGP, ""},
		{"done", []v1alpha1.StepStatus{{Name: v1alpha1.StepBGP, State: v1alpha1.StepCompleted}},
			&v1alpha1.RolloutStatus{Updated: 5, Total: 5}, "", "5/5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1alpha1.WindowsReadinessStatus{Steps: tc.steps, Rollout: tc.rollout, CurrentStep: v1alpha1.StepWindowsDataplane}
			fillColumns(st)
			if st.CurrentStep != tc.step {
				t.Errorf("currentStep %q, want %q", st.CurrentStep, tc.step)
			}
			if tc.rollout != nil && st.Rollout.Progress != tc.progress {
				t.Errorf("progress %q, want %q", st.Rollout.Progress, tc.progress)
			}
		})
	}
}
