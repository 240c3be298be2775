package controllers

import (
	"context"
	"testing"

	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

func TestAPauseBeforeTheFirstChangeHoldsAtStepOne(t *testing.T) {
	s := passOver()
	r := pausedBeforeChange{&Reconciler{}, phase.Steps()}
	if o := r.reconcile(context.Background(), s); !o.Done() {
		t.Fatalf("not paused, yet %+v", o)
	}
	s.wr.Spec.Paused = true
	o := r.reconcile(context.Background(), s)
	if o.Reason != conditions.ReasonPaused || o.Message != "step 1/6 (StrictAffinity): paused before the UDP 4789 probe and the first change; set spec.paused: false to continue" {
		t.Errorf("outcome %q: %q", o.Reason, o.Message)
	}
}
