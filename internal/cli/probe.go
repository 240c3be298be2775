package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

// runProbe is the agent of a preflight round: it reads its node's plan,
// probes its peers over UDP 4789, records the probes that reach it, and
// writes its report for the operator.
func runProbe(args []string) error {
	return runAgent("probe", args, nil, func(ctx context.Context, c client.WithWatch, namespace, node string) error {
		return probe.RunRound(ctx, round.Agent[probe.Params, probe.Result]{Client: c, Kind: probe.RoundKind, Namespace: namespace, Node: node}, probe.Sockets)
	})
}

// runRespond echoes winready's UDP 4789 probes on a machine that is not a
// node yet, such as a future Windows node listed in
// spec.preflight.extraTargets. It builds for windows/amd64 too.
func runRespond(args []string) error {
	fs := flag.NewFlagSet("respond", flag.ContinueOnError)
	listen := fs.String("listen", fmt.Sprintf("0.0.0.0:%d", probe.Port), "address to receive probes on")
	duration := fs.Duration("duration", time.Hour, "how long to answer before exiting")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addr, err := netip.ParseAddrPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return fmt.Errorf("listening on %s (is a VXLAN device or Calico already using it?): %w", addr, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	fmt.Printf("answering winready probes on UDP %s for %s\n", addr, *duration)
	seen := map[netip.Addr]bool{}
	return probe.Respond(ctx, conn, func(p probe.Packet, from netip.AddrPort) {
		if !seen[p.From] {
			seen[p.From] = true
			fmt.Printf("probe from node %s (via %s)\n", p.From, from)
		}
	})
}
