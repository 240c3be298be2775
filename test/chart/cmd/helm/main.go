// Command helm installs, upgrades and uninstalls winready's chart with the
// Helm SDK, as the helm command does, with release name winready and Helm's
// release records as Secrets in the release's namespace:
//
//	go run ./cmd/helm -kubeconfig K install [-f values.yaml] [-take-ownership] CHART
//	go run ./cmd/helm -kubeconfig K upgrade [-f values.yaml] CHART
//	go run ./cmd/helm -kubeconfig K uninstall
//
// The end-to-end suite upgrades a running migration from the previous
// release's chart with it, and uninstalls and installs it again mid-way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/winready/winready/test/chart/render"
)

// releaseName is the release the suite installs winready as.
const releaseName = "winready"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	global := flag.NewFlagSet("helm", flag.ContinueOnError)
	kubeconfig := global.String("kubeconfig", "", "the kubeconfig Helm reads")
	namespace := global.String("namespace", "default", "the release's namespace, where Helm keeps its records")
	if err := global.Parse(args); err != nil {
		return err
	}
	if global.NArg() == 0 {
		return errors.New("usage: helm -kubeconfig K install|upgrade|uninstall [flags] [CHART]")
	}
	verb, rest := global.Arg(0), global.Args()[1:]
	cmd := flag.NewFlagSet(verb, flag.ContinueOnError)
	valuesFile := cmd.String("f", "", "a values file, as helm -f reads it")
	takeOwnership := cmd.Bool("take-ownership", false, "adopt objects another tool created, as helm install --take-ownership does")
	if err := cmd.Parse(rest); err != nil {
		return err
	}

	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = kubeconfig, namespace
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, *namespace, "secret", func(format string, v ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", v...)
	}); err != nil {
		return err
	}
	if verb == "uninstall" {
		res, err := action.NewUninstall(cfg).Run(releaseName)
		if err != nil {
			return err
		}
		fmt.Println(res.Info)
		return nil
	}

	if cmd.NArg() != 1 {
		return fmt.Errorf("usage: helm %s [-f values.yaml] CHART", verb)
	}
	c, err := render.Load(cmd.Arg(0))
	if err != nil {
		return err
	}
	values, err := render.ReadValues(*valuesFile)
	if err != nil {
		return err
	}
	switch verb {
	case "install":
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.TakeOwnership = releaseName, *namespace, *takeOwnership
		rel, err := install.RunWithContext(ctx, c, values)
		if err != nil {
			return err
		}
		fmt.Printf("installed %s %s, revision %d\n", rel.Name, rel.Chart.Metadata.Version, rel.Version)
	case "upgrade":
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = *namespace
		rel, err := upgrade.RunWithContext(ctx, releaseName, c, values)
		if err != nil {
			return err
		}
		fmt.Printf("upgraded %s to %s, revision %d\n", rel.Name, rel.Chart.Metadata.Version, rel.Version)
	default:
		return fmt.Errorf("unknown command %q: install, upgrade or uninstall", verb)
	}
	return nil
}
