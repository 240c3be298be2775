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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/preflight"
)

// runPodCheck is a check pod of a pod network check round: it serves its
// TCP echo, says so in its report, waits for the plan that pairs it with
// pods on other nodes, runs its checks and reports them. It runs on the pod
// network with the restricted Pod Security level.
func runPodCheck(args []string) error {
	o, err := podCheckFlags(args)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp4", fmt.Sprintf(":%d", podcheck.Port))
	if err != nil {
		return fmt.Errorf("serving the TCP echo: %w", err)
	}
	go func() { _ = podcheck.Serve(ctx, ln) }()
	report := func(data map[string]string) error {
		return writeCheckReport(ctx, c, podcheck.Report(o.namespace, o.round, o.node, data), data[podcheck.ReportStage] == podcheck.StageDone)
	}
	check := podcheck.Config{PodIP: o.podIP}
	if err := report(podcheck.EncodeServing(o.round, o.node, o.podIP, check.PodMTU())); err != nil {
		return err
	}
	plan, err := waitForPlan(ctx, c, o.namespace, o.round)
	if err != nil {
		return err
	}
	np, err := preflight.DecodePlan(plan, o.node)
	if err != nil {
		// A node that joined after the plan was made is not part of the round.
		return report(podcheck.EncodeDone(o.round, o.node, o.podIP, podcheck.Result{}, err.Error()))
	}
	s := podcheck.DecodeSettings(plan)
	check.Peers, check.Service, check.DNSName, check.MTU = np.Peers, s.Service, s.DNSName, s.MTU
	if err := report(podcheck.EncodeDone(o.round, o.node, o.podIP, podcheck.Run(ctx, check), "")); err != nil {
		return err
	}
	// The DaemonSet restarts an exited pod, and peers may still be testing
	// this one: serve until the operator removes the round.
	<-ctx.Done()
	return nil
}

// podCheckOptions are winready podcheck's flags.
type podCheckOptions struct {
	namespace, node, round string
	podIP                  netip.Addr
}

func podCheckFlags(args []string) (podCheckOptions, error) {
	var o podCheckOptions
	fs := flag.NewFlagSet("podcheck", flag.ContinueOnError)
	fs.StringVar(&o.namespace, "namespace", preflight.DefaultProbeNamespace, "namespace of the plan and the reports")
	fs.StringVar(&o.node, "node", os.Getenv("NODE_NAME"), "this node's name (env NODE_NAME)")
	podIPText := fs.String("pod-ip", os.Getenv("POD_IP"), "this pod's address (env POD_IP)")
	fs.StringVar(&o.round, "round", os.Getenv("ROUND"), "the round (env ROUND)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	const required = "--node, --round and --pod-ip (or NODE_NAME, ROUND, POD_IP) are required"
	var err error
	if o.podIP, err = netip.ParseAddr(*podIPText); err != nil {
		return o, fmt.Errorf(required+": %w", err)
	}
	if o.node == "" || o.round == "" {
		return o, errors.New(required)
	}
	return o, nil
}

// writeCheckReport writes a report: the first is created, the next
// replaces it; either falls back on the other (a restarted pod, a report
// removed by hand), so that a pod makes two writes in a round.
func writeCheckReport(ctx context.Context, c client.Client, cm *corev1.ConfigMap, replace bool) error {
	var err error
	if replace {
		if err = c.Update(ctx, cm); apierrors.IsNotFound(err) {
			err = c.Create(ctx, cm)
		}
	} else if err = c.Create(ctx, cm); apierrors.IsAlreadyExists(err) {
		err = c.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("writing the pod network check report: %w", err)
	}
	return nil
}

// waitForPlan watches the plan ConfigMap until it holds round's plan. A
// watch of one object by name costs the API server one event per pod.
func waitForPlan(ctx context.Context, c client.WithWatch, namespace, round string) (map[string]string, error) {
	for {
		w, err := c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(namespace),
			client.MatchingFields{"metadata.name": podcheck.Name})
		if err != nil {
			return nil, fmt.Errorf("watching the pod network check plan: %w", err)
		}
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted && cm.Data[preflight.PlanRound] == round {
				w.Stop()
				return cm.Data, nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, errors.New("stopped before the plan came")
		}
	}
}
