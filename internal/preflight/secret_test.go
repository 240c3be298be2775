package preflight

import (
	"bytes"
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestEachRoundsPlanCarriesItsOwnSecret(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).Build()
	cfg := RoundConfig{Namespace: DefaultProbeNamespace, Image: "winready:dev"}
	nodes := []ProbeNode{{Name: "linux-0", IP: netip.MustParseAddr("10.0.0.11")}, {Name: "linux-1", IP: netip.MustParseAddr("10.0.0.12")}}
	secretOf := func(round string) []byte {
		t.Helper()
		if err := StartRound(ctx, c, cfg, round, nodes, nil); err != nil {
			t.Fatal(err)
		}
		plan := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: ProbeName}, plan); err != nil {
			t.Fatal(err)
		}
		np, err := DecodePlan(plan.Data, "linux-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(np.Secret) != 32 {
			t.Fatalf("round %s: a secret of %d bytes, want 32", round, len(np.Secret))
		}
		got, _, err := ReadPlan(ctx, c, cfg.Namespace, round)
		if err != nil || len(got) != len(nodes) {
			t.Fatalf("round %s: the secret is read back as a node: %v, %v", round, got, err)
		}
		return np.Secret
	}
	if a, b := secretOf("r1"), secretOf("r2"); bytes.Equal(a, b) {
		t.Fatal("two rounds share a secret")
	}
}
