package calico_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/kit"
)

// TestGuardFailureFromAPIServer sends a JSON patch whose test fails, and one
// the object's validation rejects, to a real apiserver: only the first is a
// guard failure.
func TestGuardFailureFromAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs the envtest control plane: run through make test")
	}
	log.SetLogger(logr.Discard())
	env, err := kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs, NoWinreadyCRD: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guarded"}, Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	failing := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/data/k","value":"other"},{"op":"replace","path":"/data/k","value":"w"}]`))
	err = c.Patch(ctx, cm, failing)
	if err == nil || !errors.Is(calico.ClassifyPatchError(err), calico.ErrGuardFailed) {
		t.Errorf("a failed test operation is not a guard failure: %v", err)
	}
	absent, _ := json.Marshal([]calico.PatchOp{calico.TestAbsent("/metadata/annotations"),
		{Op: "add", Path: "/metadata/annotations", Value: map[string]string{"a": "b"}}})
	if err := c.Patch(ctx, cm, client.RawPatch(types.JSONPatchType, absent)); err != nil {
		t.Errorf("a test of an absent member does not hold where it is absent: %v", err)
	}
	err = c.Patch(ctx, cm, client.RawPatch(types.JSONPatchType, absent))
	if err == nil || !errors.Is(calico.ClassifyPatchError(err), calico.ErrGuardFailed) {
		t.Errorf("a test of an absent member holds where it is present: %v", err)
	}
	invalid := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/data/test-key!","value":"w"}]`))
	err = c.Patch(ctx, cm, invalid)
	if err == nil || errors.Is(calico.ClassifyPatchError(err), calico.ErrGuardFailed) {
		t.Errorf("a validation error is a guard failure: %v", err)
	}
}
