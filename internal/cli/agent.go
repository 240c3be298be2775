package cli

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/round"
)

// runAgent runs an agent of a round (the probe, the pod network check): it
// parses the flags every agent takes (the namespace and this node) and those
// flags adds, connects to the API server and runs serve, then stays until
// stopped: the DaemonSet would restart an agent that exits, and the operator
// removes the agents once every report is in.
func runAgent(name string, args []string, flags func(*flag.FlagSet),
	serve func(ctx context.Context, c client.WithWatch, namespace, node string) error) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	namespace := fs.String("namespace", round.DefaultNamespace, "namespace of the plans and the reports")
	node := fs.String("node", os.Getenv("NODE_NAME"), "this node's name (env NODE_NAME)")
	if flags != nil {
		flags(fs)
	}
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
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, c, *namespace, *node); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
