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
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

const planNamespace, planRound = "winready-probe", round.ID("r1")

// roundOfThree is a client holding kind's DaemonSet and the plans of a
// round of three nodes, each probing the two others.
func roundOfThree[P any](t *testing.T, k round.Kind, params P) client.WithWatch {
	t.Helper()
	start := time.Now()
	addrs := map[string]netip.Addr{"linux-0": netip.MustParseAddr("10.0.0.1"), "linux-1": netip.MustParseAddr("10.0.0.2"),
		"linux-2": netip.MustParseAddr("10.0.0.3")}
	objs := []client.Object{&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: planNamespace, Name: k.Name},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{round.RoundAnnotation: string(planRound)}}}}}}
	for node, addr := range addrs {
		var peers []netip.Addr
		for other, a := range addrs {
			if other != node {
				peers = append(peers, a)
			}
		}
		body, err := json.Marshal(map[string]any{"addr": addr, "start": start, "end": start.Add(time.Minute),
			"peers": peers, "expect": peers, "params": params})
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: planNamespace, Name: k.PlanName(node),
				Labels: map[string]string{round.ComponentLabel: k.Component, round.PlanLabel: string(planRound)}},
			Data: map[string]string{round.NodeKey: node, round.PlanKey: string(body)}})
	}
	if k.Secret {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: planNamespace, Name: k.Name},
			Data: map[string][]byte{round.SecretRoundKey: []byte(planRound), round.SecretKey: []byte("the round's key")}})
	}
	return fake.NewClientBuilder().WithScheme(calico.NewScheme()).WithObjects(objs...).Build()
}

// seeingOnly reads c as a cache that has seen node's plan only.
func seeingOnly(c client.WithWatch, node string) client.Reader {
	return interceptor.NewClient(c, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if cms, ok := list.(*corev1.ConfigMapList); ok {
			var seen []corev1.ConfigMap
			for _, cm := range cms.Items {
				if cm.Data[round.NodeKey] == node {
					seen = append(seen, cm)
				}
			}
			cms.Items = seen
		}
		return nil
	}})
}

// doneReports are the round's reports that c holds, by node.
func doneReports[R any](t *testing.T, c client.Client) map[string]round.Report[R] {
	t.Helper()
	cms := &corev1.ConfigMapList{}
	if err := c.List(context.Background(), cms, client.HasLabels{round.ReportLabel}); err != nil {
		t.Fatal(err)
	}
	out := map[string]round.Report[R]{}
	for i := range cms.Items {
		if r := round.DecodeReport[R](&cms.Items[i]); r.Stage == round.Done {
			out[r.Node] = r
		}
	}
	return out
}

// TestTheProbeAgentsWaitForEveryPlanOfTheirRound: a cache may hold one plan
// of a round when the DaemonSet arrives; the agents play the round once all
// its plans are there, every node's report written.
func TestTheProbeAgentsWaitForEveryPlanOfTheirRound(t *testing.T) {
	c := roundOfThree(t, probe.RoundKind, probe.Params{})
	agents := NewProbeAgents(planNamespace)
	if err := agents.Play(context.Background(), c, seeingOnly(c, "linux-2")); err != nil {
		t.Fatal(err)
	}
	if n := len(doneReports[probe.Result](t, c)); n != 0 {
		t.Fatalf("the agents played a round of three nodes from one plan: %d reports", n)
	}
	if err := agents.Play(context.Background(), c, c); err != nil {
		t.Fatal(err)
	}
	reports := doneReports[probe.Result](t, c)
	if len(reports) != 3 {
		t.Fatalf("%d reports once every plan is there, want 3", len(reports))
	}
	for node, r := range reports {
		if r.Error != "" || len(r.Result.ReceivedFrom) != 2 {
			t.Errorf("%s reported %+v, want both peers heard and no error", node, r)
		}
	}
}

// TestTheCheckPodsWaitForEveryPlanOfTheirRound: a check pod that reported
// before its peer's plan reached the cache would not know the pair was
// broken, and reports once.
func TestTheCheckPodsWaitForEveryPlanOfTheirRound(t *testing.T) {
	c := roundOfThree(t, podcheck.RoundKind, podcheck.Params{})
	pods := NewPodChecks(planNamespace)
	pods.BreakPair("linux-0", "linux-2")
	if err := pods.Play(context.Background(), c, seeingOnly(c, "linux-0")); err != nil {
		t.Fatal(err)
	}
	if err := pods.Play(context.Background(), c, c); err != nil {
		t.Fatal(err)
	}
	rep, ok := doneReports[podcheck.Result](t, c)["linux-0"]
	if !ok {
		t.Fatal("linux-0's pod reported no checks")
	}
	for _, p := range rep.Result.Peers {
		if p.Peer == netip.MustParseAddr("10.0.0.3") && p.ICMP == podcheck.Pass {
			t.Fatalf("linux-0's pod reports its broken pair with linux-2 as passing: %+v", rep.Result.Peers)
		}
	}
}
