package controllers

import (
	"fmt"

	"github.com/winready/winready/api/v1alpha1"
)

// fillColumns derives the fields that exist for kubectl get's columns from the
// rest of the status, just before it is written.
func fillColumns(st *v1alpha1.WindowsReadinessStatus) {
	st.CurrentStep = ""
	for _, s := range st.Steps {
		if s.State == v1alpha1.StepInProgress || s.State == v1alpha1.StepReverting {
			st.CurrentStep = s.Name
			break
		}
	}
	if r := st.Rollout; r != nil {
		r.Progress = fmt.Sprintf("%d/%d", r.Updated, r.Total)
	}
}
