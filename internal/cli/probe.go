package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/probe"
)

// runProbe is the agent of a preflight round: it reads its node's part of
// the plan, probes its peers over UDP 4789, records the probes that reach
// it, and writes its report for the operator.
func runProbe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	namespace := fs.String("namespace", preflight.DefaultProbeNamespace, "namespace of the plan and the reports")
	node := fs.String("node", os.Getenv("NODE_NAME"), "this node's name (env NODE_NAME)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *node == "" {
		return errors.New("--node or NODE_NAME is required")
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	plan := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: *namespace, Name: preflight.ProbeName}, plan); err != nil {
		return fmt.Errorf("reading the probe plan: %w", err)
	}
	np, err := preflight.DecodePlan(plan.Data, *node)
	if err != nil {
		return err
	}
	var agent *probe.Agent
	if len(np.Secret) == 0 {
		// Unsigned probes could be forged by any pod: a plan without a
		// secret is from another release, and its round fails visibly.
		err = errors.New("the probe plan carries no round secret")
	} else {
		agent, err = probe.Open(probe.AgentConfig{Round: probe.RoundKey(np.Round), Secret: np.Secret, NodeIP: np.IP,
			Peers: np.Peers, Extra: np.Extra, Duration: np.Duration})
	}
	var data map[string]string
	if err != nil {
		data = preflight.EncodeReport(np.Round, *node, "", nil, nil, err.Error())
	} else {
		r := agent.Run(ctx)
		data = preflight.EncodeReport(np.Round, *node, r.Mode, r.ReceivedFrom, r.EchoedBy, "")
	}
	report := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: *namespace, Name: preflight.ReportName(*node),
			Labels: preflight.ReportLabels(np.Round)},
		Data: data,
	}
	err = c.Create(ctx, report)
	if apierrors.IsAlreadyExists(err) {
		err = c.Update(ctx, report)
	}
	if err != nil {
		return fmt.Errorf("writing the probe report: %w", err)
	}
	// The DaemonSet restarts an exited agent: wait for the operator to remove
	// it once every report is in.
	<-ctx.Done()
	return nil
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
