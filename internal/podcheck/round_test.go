package podcheck

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/winready/winready/internal/round"
)

// TestCheckKeepsTheWindowOnTheAgentsClock runs a pod's check on an agent
// whose clock stands at the start of its round's window, an hour away from
// the wall clock either way: the check runs at once, with its window's time
// to run, and is reported.
func TestCheckKeepsTheWindowOnTheAgentsClock(t *testing.T) {
	const ns, node = "winready-probe", "linux-0"
	for name, offset := range map[string]time.Duration{"an hour ahead": time.Hour, "an hour behind": -time.Hour} {
		t.Run(name, func(t *testing.T) {
			start := time.Now().Add(offset).UTC().Truncate(time.Second)
			podIP := netip.MustParseAddr("10.244.0.1")
			plan := round.Plan[Params]{Round: round.NewID(1, start), Node: node, Addr: podIP,
				Start: start, End: start.Add(30 * time.Second), Peers: []netip.Addr{netip.MustParseAddr("10.244.0.2")}}
			planCM, err := round.PlanObject(RoundKind, ns, plan)
			if err != nil {
				t.Fatal(err)
			}
			// The API server's watch starts with the objects it matches as
			// added; the fake client's does not, so this one does.
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
				Watch: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
					w := watch.NewRaceFreeFake()
					w.Add(planCM.DeepCopy())
					return w, nil
				}}).Build()
			agent := round.Agent[Params, Result]{Client: c, Kind: RoundKind, Namespace: ns, Node: node,
				Clock: clocktesting.NewFakePassiveClock(start)}
			// Waiting for a window an hour away on the wall clock would end here.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()

			var checkErr error
			checked := false
			err = Check(ctx, agent, plan.Round, podIP, func(ctx context.Context, cfg Config) Result {
				checked, checkErr = true, ctx.Err()
				return Result{MTU: 1400, Peers: []PeerResult{{Peer: cfg.Peers[0], ICMP: Pass}}}
			})
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if !checked || checkErr != nil {
				t.Fatalf("checked %v with its context ended by %v, want checked within its window", checked, checkErr)
			}
			cm := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: RoundKind.ReportName(node)}, cm); err != nil {
				t.Fatalf("reading the report: %v", err)
			}
			rep := round.DecodeReport[Result](cm)
			if rep.Stage != round.Done || rep.Error != "" || rep.Result.MTU != 1400 || len(rep.Result.Peers) != 1 {
				t.Errorf("report %+v, want done with the check's result", rep)
			}
		})
	}
}
