package probe

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/winready/winready/internal/round"
)

// recordingNetwork is a Network that keeps the config it was opened with
// and hears every peer it expects.
type recordingNetwork struct{ opened []AgentConfig }

func (n *recordingNetwork) open(cfg AgentConfig) (Prober, error) {
	n.opened = append(n.opened, cfg)
	return proberFunc(func(_ context.Context, report func(Result)) Result {
		res := Result{Mode: ModeCapture, ReceivedFrom: cfg.Expect, EchoedBy: cfg.Extra}
		report(res)
		return res
	}), nil
}

type proberFunc func(context.Context, func(Result)) Result

func (f proberFunc) Run(ctx context.Context, report func(Result)) Result { return f(ctx, report) }

func TestRunRoundProbesOverTheNetworkItIsGivenAndReportsWhatItHeard(t *testing.T) {
	const ns, node = "winready-probe", "linux-0"
	start := time.Now().Add(time.Second).UTC().Truncate(time.Second)
	plan := round.Plan[Params]{Round: round.NewID(1, start), Node: node, Addr: netip.MustParseAddr("10.0.0.11"),
		Start: start, End: start.Add(30 * time.Second),
		Peers: []netip.Addr{netip.MustParseAddr("10.0.0.12")}, Expect: []netip.Addr{netip.MustParseAddr("10.0.0.13")},
		Params: Params{Extra: []netip.Addr{netip.MustParseAddr("10.0.1.1")}}}
	planCM, err := round.PlanObject(RoundKind, ns, plan)
	if err != nil {
		t.Fatal(err)
	}
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: RoundKind.Name},
		Data: map[string][]byte{round.SecretRoundKey: []byte(plan.Round), round.SecretKey: []byte("the round's key")}}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(planCM, key).Build()
	network := &recordingNetwork{}

	err = RunRound(context.Background(), round.Agent[Params, Result]{Client: c, Kind: RoundKind, Namespace: ns, Node: node}, network.open)
	if err != nil {
		t.Fatalf("RunRound: %v", err)
	}

	if len(network.opened) != 1 {
		t.Fatalf("the network was opened %d times, want once", len(network.opened))
	}
	cfg := network.opened[0]
	if cfg.NodeIP != plan.Addr || !slices.Equal(cfg.Peers, plan.Peers) || !slices.Equal(cfg.Expect, plan.Expect) ||
		!slices.Equal(cfg.Extra, plan.Params.Extra) || !cfg.Start.Equal(plan.Start) || !cfg.End.Equal(plan.End) {
		t.Errorf("opened with %+v, want the plan's address, peers, expected senders, extra targets and window", cfg)
	}
	if string(cfg.Secret) != "the round's key" || cfg.Round != RoundKey(string(plan.Round)) {
		t.Errorf("opened with secret %q and round %x, want the round's key and ID", cfg.Secret, cfg.Round)
	}
	reportCM := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: RoundKind.ReportName(node)}, reportCM); err != nil {
		t.Fatalf("reading the report: %v", err)
	}
	rep := round.DecodeReport[Result](reportCM)
	if rep.Round != plan.Round || rep.Stage != round.Done || rep.Error != "" ||
		!slices.Equal(rep.Result.ReceivedFrom, plan.Expect) || !slices.Equal(rep.Result.EchoedBy, plan.Params.Extra) {
		t.Errorf("report %+v, want round %s done with what the network heard", rep, plan.Round)
	}
}
