package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/round"
)

// runPodCheck is a check pod of a pod network check round: it serves its
// TCP echo, says so in its report, waits for the plan that pairs it with
// pods on other nodes, runs its checks and reports them. It runs on the pod
// network with the restricted Pod Security level, and serves until the
// operator removes the round, as peers may still be testing it.
func runPodCheck(args []string) error {
	var podIPText, id *string
	flags := func(fs *flag.FlagSet) {
		podIPText = fs.String("pod-ip", os.Getenv("POD_IP"), "this pod's address (env POD_IP)")
		id = fs.String("round", os.Getenv("ROUND"), "the round (env ROUND)")
	}
	return runAgent("podcheck", args, flags, func(ctx context.Context, c client.WithWatch, namespace, node string) error {
		podIP, err := netip.ParseAddr(*podIPText)
		if *id == "" || err != nil {
			return fmt.Errorf("--round and --pod-ip (or ROUND, POD_IP) are required: %w", err)
		}
		ln, err := net.Listen("tcp4", fmt.Sprintf(":%d", podcheck.Port))
		if err != nil {
			return fmt.Errorf("serving the TCP echo: %w", err)
		}
		go func() { _ = podcheck.Serve(ctx, ln) }()
		a := round.Agent[podcheck.Params, podcheck.Result]{Client: c, Kind: podcheck.RoundKind, Namespace: namespace, Node: node}
		return podcheck.RunRound(ctx, a, round.ID(*id), podIP, podcheck.Run)
	})
}
