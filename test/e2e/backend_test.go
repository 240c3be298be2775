package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/round"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
)

// A backend is what plays Calico for the scenarios: the simulator, or the
// real Tigera operator with a controller manager, a scheduler and kwok.
// The scenarios only talk to the API server, so they are the same for both.
type backend interface {
	// Start brings up the control plane and what plays Calico.
	Start(ctx context.Context) (*rest.Config, error)
	// Seed creates the seed's main cluster and returns once Calico reports
	// it healthy.
	Seed(ctx context.Context, c client.Client, cl calicosim.Cluster) error
	// Clean removes what Seed and the scenario created, so that the next
	// scenario starts from scratch.
	Clean(ctx context.Context, c client.Client) error
	// Replacements starts counting the calico-node pods the DaemonSet
	// controller replaces on each node; the function it returns says how
	// many so far, by node name; stop ends the count.
	Replacements(ctx context.Context, c client.Client) (count func() map[string]int, stop func(), err error)
	Stop() error
}

// crdPaths are winready's CRD and Calico's for the simulator backend.
var repoRoot = filepath.Join("..", "..")

// simBackend plays Calico with the simulator, in this process.
type simBackend struct {
	env    *kit.Env
	cancel context.CancelFunc
	done   chan error
	scheme *runtime.Scheme
	sim    *calicosim.Simulator
}

func (b *simBackend) Start(ctx context.Context) (*rest.Config, error) {
	env, err := kit.Environment(kit.Options{CalicoCRDs: filepath.Join(repoRoot, "bin", "crds")})
	if err != nil {
		return nil, err
	}
	b.env = env
	cfg, err := b.env.Start()
	if err != nil {
		return nil, err
	}
	mgr, sim, _, err := calicosim.NewManager(cfg, b.scheme, calicosim.Options{}, round.DefaultNamespace)
	if err != nil {
		return nil, err
	}
	b.sim = sim
	mctx, cancel := context.WithCancel(ctx)
	b.cancel, b.done = cancel, make(chan error, 1)
	go func() { b.done <- mgr.Start(mctx) }()
	return cfg, nil
}

func (b *simBackend) Seed(ctx context.Context, c client.Client, cl calicosim.Cluster) error {
	if err := calicosim.Seed(ctx, c, cl); err != nil {
		return err
	}
	return calicosim.WaitSettled(ctx, c, 2*time.Minute)
}

func (b *simBackend) Clean(ctx context.Context, c client.Client) error {
	return calicosim.Clean(ctx, c)
}

// Replacements is what the simulated DaemonSet controller counted per node
// since the call.
func (b *simBackend) Replacements(context.Context, client.Client) (func() map[string]int, func(), error) {
	count := func() map[string]int { return b.sim.Rollouts(calico.SystemNamespace, calico.NodeDaemonSet).PerNode }
	before := count()
	return func() map[string]int {
		since := map[string]int{}
		for node, n := range count() {
			if d := n - before[node]; d > 0 {
				since[node] = d
			}
		}
		return since
	}, func() {}, nil
}

func (b *simBackend) Stop() error {
	var simErr error
	if b.cancel != nil {
		b.cancel()
		if err := <-b.done; err != nil {
			simErr = fmt.Errorf("simulator: %w", err)
		}
	}
	return errors.Join(simErr, b.env.Stop())
}

// process is a binary the suite runs, stopped with SIGTERM.
type process struct {
	name    string
	cmd     *exec.Cmd
	log     *os.File
	stopped bool
}

func startProcess(name, logDir string, env []string, bin string, args ...string) (*process, error) {
	return startProcessIn(name, logDir, append(os.Environ(), env...), bin, args...)
}

// startProcessIn starts bin with exactly the environment env.
func startProcessIn(name, logDir string, env []string, bin string, args ...string) (*process, error) {
	log, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so that nothing it starts outlives the suite.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return &process{name: name, cmd: cmd, log: log}, nil
}

// tail is the end of the process's log, and whether it is still running,
// for a failed spec's report.
func (p *process) tail(n int) string {
	if p == nil {
		return ""
	}
	data, err := os.ReadFile(p.log.Name())
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	state := "running"
	if err := syscall.Kill(p.cmd.Process.Pid, 0); err != nil {
		state = "not running (" + err.Error() + ")"
	}
	return fmt.Sprintf("%s is %s; the last %d lines of its log:\n%s", p.name, state, n, strings.Join(lines[max(0, len(lines)-n):], "\n"))
}

// Stop ends the process; stopping it again does nothing (a scenario that
// stopped the suite's winready may fail before starting another).
func (p *process) Stop() error {
	if p == nil || p.cmd.Process == nil || p.stopped {
		return nil
	}
	p.stopped = true
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		// Stopped by a signal, the process's exit status says nothing new.
		_ = p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	return p.log.Close()
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !isAlreadyExists(err) {
		return err
	}
	return nil
}
