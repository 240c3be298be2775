package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/winready/winready/internal/conditions"
)

func TestARollbackWithoutOriginals(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := recordedOriginals{&Reconciler{Client: c, APIReader: c, opts: Options{Namespace: "winready-system"}.withDefaults()}}

	o := r.reconcile(context.Background(), passOver())
	if o.Reason != conditions.ReasonNothingToRollBack {
		t.Errorf("no record and no originals: %q %q, want NothingToRollBack", o.Reason, o.Message)
	}
	s := passOver()
	s.set(conditions.Ready, metav1.ConditionTrue, conditions.ReasonRolledBack, "every value the migration changed is restored")
	if o := r.reconcile(context.Background(), s); o.Reason != conditions.ReasonRolledBack || o.Message != "every value the migration changed is restored" {
		t.Errorf("after a finished rollback: %q %q, want it to stay RolledBack", o.Reason, o.Message)
	}
}
