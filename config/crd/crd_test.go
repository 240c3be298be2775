package crd

import (
	"slices"
	"testing"
)

// TestColumnsShowTheMigrationsProgress: kubectl get wr shows the step in
// progress, the rollout's updated/total and the time left; the free-text
// message only with -o wide.
func TestColumnsShowTheMigrationsProgress(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	cols := crds[0].Spec.Versions[0].AdditionalPrinterColumns
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
		wantPriority := int32(0)
		if c.Name == "Message" {
			wantPriority = 1
		}
		if c.Priority != wantPriority {
			t.Errorf("column %s has priority %d, want %d", c.Name, c.Priority, wantPriority)
		}
	}
	want := []string{"Direction", "Phase", "Step", "Progress", "ETA", "Ready", "Message", "Age"}
	if !slices.Equal(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
	paths := map[string]string{}
	for _, c := range cols {
		paths[c.Name] = c.JSONPath
	}
	for name, path := range map[string]string{"Step": ".status.currentStep", "Progress": ".status.rollout.progress",
		"ETA": ".status.rollout.estimatedTimeLeft"} {
		if paths[name] != path {
			t.Errorf("column %s reads %q, want %q", name, paths[name], path)
		}
	}
}
