// Command demo runs winready's migration on a local control plane with a
// simulated Calico cluster: it starts kube-apiserver and etcd (the envtest
// assets), seeds the usual Calico cluster, runs the simulated Tigera operator
// next to the real winready reconciler, applies config/samples, and prints the
// WindowsReadiness as `kubectl get wr -w` would.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
)

// operatorNamespace is where winready records the originals; its probe
// rounds run in round.DefaultNamespace.
const operatorNamespace = "winready-system"

func main() {
	exitWhenReady := flag.Bool("exit-when-ready", false, "stop once the WindowsReadiness is Ready instead of waiting for Ctrl-C")
	kubeconfigPath := flag.String("kubeconfig-out", filepath.Join("bin", "demo.kubeconfig"), "where to write a kubeconfig for kubectl")
	verbose := flag.Bool("v", false, "show the operator's logs")
	flag.Parse()
	if err := run(*exitWhenReady, *kubeconfigPath, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(exitWhenReady bool, kubeconfigPath string, verbose bool) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The managers stop before the control plane does.
	mgrCtx, stopManagers := context.WithCancel(ctx)
	defer stopManagers()
	logf.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(logLevel(verbose)),
		zap.RawZapOpts(uberzap.WrapCore(func(c zapcore.Core) zapcore.Core { return quietShutdown{c, mgrCtx} }))))

	env, err := kit.Environment(kit.Options{CalicoCRDs: filepath.Join("bin", "crds")})
	if err != nil {
		return err
	}
	fmt.Println("starting a local control plane (kube-apiserver, etcd) ...")
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the control plane (run make envtest-assets first): %w", err)
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	if err := writeKubeconfig(env, kubeconfigPath); err != nil {
		return err
	}

	scheme, err := controllers.NewScheme()
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := seed(ctx, c); err != nil {
		return err
	}
	r, managers, err := newManagers(cfg, scheme)
	if err != nil {
		return err
	}
	errs := make(chan error, len(managers))
	for _, m := range managers {
		go func() { errs <- m.Start(mgrCtx) }()
	}
	defer func() {
		stopManagers()
		for range managers {
			err = errors.Join(err, <-errs)
		}
	}()
	return watchUntilReady(ctx, c, scheme, r.Writes, exitWhenReady, kubeconfigPath)
}

// writeKubeconfig writes a kubeconfig of an admin of env's control plane for
// kubectl.
func writeKubeconfig(env *kit.Env, path string) error {
	user, err := env.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, kubeconfig, 0o600)
}

// seed creates the namespaces and the usual Calico cluster.
func seed(ctx context.Context, c client.Client) error {
	fmt.Println("seeding the Calico cluster: 3 Linux nodes, pool 172.20.0.0/16 VXLANCrossSubnet, BGP Enabled, strictAffinity off")
	for _, ns := range []string{operatorNamespace, round.DefaultNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := calicosim.Seed(ctx, c, calicosim.MainCluster()); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	return nil
}

// newManagers returns winready's reconciler, and the managers to start: the
// simulated Tigera operator's and winready's.
func newManagers(cfg *rest.Config, scheme *runtime.Scheme) (*controllers.Reconciler, []manager.Manager, error) {
	// The simulated Tigera operator runs with a status lag and a per-node
	// rollout pace closer to a real cluster than the test suites use.
	// The simulated nodes answer the UDP 4789 probe through the same API as
	// real agents.
	simMgr, _, _, err := calicosim.NewManager(cfg, scheme,
		calicosim.Options{RolloutStep: 300 * time.Millisecond, StatusLag: 200 * time.Millisecond}, round.DefaultNamespace)
	if err != nil {
		return nil, nil, err
	}

	// winready's manager, wired as internal/cli (runManager) wires it.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   controllers.CacheOptions(round.DefaultNamespace),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return nil, nil, err
	}
	r, err := controllers.Setup(mgr, controllers.Options{Namespace: operatorNamespace, ProbeNamespace: round.DefaultNamespace,
		ProbeImage: "winready:test"})
	if err != nil {
		return nil, nil, err
	}
	return r, []manager.Manager{simMgr, mgr}, nil
}

// watchUntilReady applies config/samples and prints the WindowsReadiness at
// each change until it is Ready (with exitWhenReady) or ctx ends.
func watchUntilReady(ctx context.Context, c client.WithWatch, scheme *runtime.Scheme, writes *metrics.WriteCounter,
	exitWhenReady bool, kubeconfigPath string) error {
	sample, err := readSample(scheme)
	if err != nil {
		return err
	}
	w, err := c.Watch(ctx, &v1alpha1.WindowsReadinessList{})
	if err != nil {
		return err
	}
	defer w.Stop()
	start := time.Now()
	if err := c.Create(ctx, sample); err != nil {
		return fmt.Errorf("applying the sample: %w", err)
	}
	fmt.Printf("applied config/samples: windowsreadiness.winready.io/%s created\n\n", sample.Name)

	tbl := newTable(os.Stdout, sample.Name)
	last := ""
	for {
		select {
		case <-ctx.Done():
			fmt.Println("\nstopping")
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the watch ended")
			}
			if ev.Type == watch.Error {
				continue
			}
			wr, ok := ev.Object.(*v1alpha1.WindowsReadiness)
			if !ok {
				continue
			}
			row := []string{wr.Name, string(wr.Spec.Direction), string(wr.Status.Phase), ready(wr), wr.Status.Message}
			shown := strings.Join(row, "\x00")
			if shown == last {
				continue
			}
			last = shown
			tbl.row(row[0], row[1], row[2], row[3], time.Since(start).Round(10*time.Millisecond).String(), row[4])
			if wr.Status.Phase != v1alpha1.PhaseReady {
				continue
			}
			printWrites(writes.Snapshot(), time.Since(start))
			if exitWhenReady {
				return nil
			}
			fmt.Printf("look around with: kubectl --kubeconfig %s get wr,installation,ippools,tigerastatus\n", kubeconfigPath)
			fmt.Println("press Ctrl-C to stop")
		}
	}
}

// printWrites says how long the migration took and what winready wrote.
func printWrites(writes map[string]int, took time.Duration) {
	calico, own := 0, 0
	for key, n := range writes {
		if strings.HasPrefix(key, "Installation ") || strings.HasPrefix(key, "IPAMConfiguration ") ||
			strings.Contains(key, " tigera-operator ") {
			calico += n
		} else {
			own += n
		}
	}
	fmt.Printf("\nReady in %s. winready's API writes: %d to Calico's objects, %d to its own (originals record, probe round): %v\n",
		took.Round(10*time.Millisecond), calico, own, writes)
}

// table prints the watch as `kubectl get wr -w` does, but with every column
// as wide as its longest value can be, so that rows printed one at a time
// line up under the header. MESSAGE, of any length, comes last.
type table struct {
	out    io.Writer
	widths []int // of every column but the last
}

func newTable(out io.Writer, name string) *table {
	phase := 0
	for _, p := range []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhasePreflight, v1alpha1.PhasePlanned,
		v1alpha1.PhaseAwaitingApproval, v1alpha1.PhaseMigrating, v1alpha1.PhaseReady, v1alpha1.PhaseRollingBack,
		v1alpha1.PhaseRolledBack, v1alpha1.PhasePaused, v1alpha1.PhaseStalled} {
		phase = max(phase, len(p))
	}
	header := []string{"NAME", "DIRECTION", "PHASE", "READY", "AGE", "MESSAGE"}
	t := &table{out: out, widths: []int{
		max(len(header[0]), len(name)),
		max(len(header[1]), len(v1alpha1.DirectionMigrate), len(v1alpha1.DirectionRollback)),
		max(len(header[2]), phase),
		max(len(header[3]), len(metav1.ConditionUnknown)),
		max(len(header[4]), len("10m59.99s")),
	}}
	t.row(header...)
	return t
}

// row prints one line; a value wider than its column pushes the rest of that
// line right rather than being cut.
func (t *table) row(cols ...string) {
	var b strings.Builder
	for i, c := range cols[:len(cols)-1] {
		fmt.Fprintf(&b, "%-*s   ", t.widths[i], c)
	}
	b.WriteString(cols[len(cols)-1])
	fmt.Fprintln(t.out, strings.TrimRight(b.String(), " "))
}

func ready(wr *v1alpha1.WindowsReadiness) string {
	for _, c := range wr.Status.Conditions {
		if c.Type == "Ready" {
			return string(c.Status)
		}
	}
	return ""
}

// readSample reads config/samples the way kubectl apply would.
func readSample(scheme *runtime.Scheme) (*v1alpha1.WindowsReadiness, error) {
	path := filepath.Join("config", "samples", "winready_v1alpha1_windowsreadiness.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	wr := &v1alpha1.WindowsReadiness{}
	if _, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode(data, nil, wr); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return wr, nil
}

// quietShutdown drops the errors that are only the managers' context being
// cancelled once they stop: a request or a reconcile cut short by the demo's
// own shutdown is not a failure. Every other entry is written.
type quietShutdown struct {
	zapcore.Core
	managers context.Context
}

func (q quietShutdown) With(fields []zapcore.Field) zapcore.Core {
	return quietShutdown{q.Core.With(fields), q.managers}
}

func (q quietShutdown) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if q.Enabled(e.Level) {
		return ce.AddCore(e, q)
	}
	return ce
}

func (q quietShutdown) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if q.managers.Err() != nil {
		for _, f := range fields {
			if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && errors.Is(err, context.Canceled) {
				return nil
			}
		}
	}
	return q.Core.Write(e, fields)
}

func logLevel(verbose bool) zapcore.Level {
	if verbose {
		return zapcore.InfoLevel
	}
	return zapcore.ErrorLevel
}
