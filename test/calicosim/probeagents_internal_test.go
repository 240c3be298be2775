package calicosim

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

// TestTheProbeAgentsWaitForEveryPlanOfTheirRound: a cache may hold one plan
// of a round when the DaemonSet arrives; the agents play the round once all
// its plans are there, every node's report written.
func TestTheProbeAgentsWaitForEveryPlanOfTheirRound(t *testing.T) {
	const ns, id = "winready-probe", round.ID("r1")
	start := time.Now()
	addrs := map[string]netip.Addr{"linux-0": netip.MustParseAddr("10.0.0.1"), "linux-1": netip.MustParseAddr("10.0.0.2"),
		"linux-2": netip.MustParseAddr("10.0.0.3")}
	objs := []client.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: probe.RoundKind.Name},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{round.RoundAnnotation: string(id)}}}}}}
	for node, addr := range addrs {
		var peers []netip.Addr
		for other, a := range addrs {
			if other != node {
				peers = append(peers, a)
			}
		}
		body, err := json.Marshal(map[string]any{"addr": addr, "start": start, "end": start.Add(time.Minute),
			"peers": peers, "expect": peers, "params": probe.Params{}})
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: probe.RoundKind.PlanName(node),
				Labels: map[string]string{round.ComponentLabel: probe.RoundKind.Component, round.PlanLabel: string(id)}},
			Data: map[string]string{round.NodeKey: node, round.PlanKey: string(body)}})
	}
	c := fake.NewClientBuilder().WithScheme(calico.NewScheme()).WithObjects(objs...).Build()
	// A cache that has seen linux-2's plan only.
	oneSeen := interceptor.NewClient(c, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if cms, ok := list.(*corev1.ConfigMapList); ok {
			var seen []corev1.ConfigMap
			for _, cm := range cms.Items {
				if cm.Data[round.NodeKey] == "linux-2" {
					seen = append(seen, cm)
				}
			}
			cms.Items = seen
		}
		return nil
	}})
	reports := func() int {
		cms := &corev1.ConfigMapList{}
		if err := c.List(context.Background(), cms, client.HasLabels{round.ReportLabel}); err != nil {
			t.Fatal(err)
		}
		return len(cms.Items)
	}

	agents := NewProbeAgents(ns)
	if err := agents.Play(context.Background(), c, oneSeen); err != nil {
		t.Fatal(err)
	}
	if n := reports(); n != 0 {
		t.Fatalf("the agents played a round of three nodes from one plan: %d reports", n)
	}
	if err := agents.Play(context.Background(), c, c); err != nil {
		t.Fatal(err)
	}
	if n := reports(); n != len(addrs) {
		t.Fatalf("%d reports once every plan is there, want %d", n, len(addrs))
	}
}
