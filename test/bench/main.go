// Command bench measures winready on a local control plane with a simulated
// Calico cluster at several sizes, side by side with two references measured
// in the same run: the floor (one calico-node rollout at the simulated pace
// plus the simulator's status lags) and the manual runbook scripted with
// kubectl (hack/runbook.sh: each change and its wait, so two rollouts).
// winready runs as the production binary, in a process of its own, so that
// its memory is its own. The simulated DaemonSet controller counts the
// calico-node rollouts each run forced. Results print as a table.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/internal/rollout"
	"github.com/winready/winready/test/auditlog"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
)

const operatorNamespace = "winready-system"

type config struct {
	sizes       []int
	rolloutStep time.Duration
	statusLag   time.Duration
	quiet       time.Duration
	winready    string
	winreadyLog string
	kubectl     string
	workdir     string
	// migration and rounds choose the measurements; nameLen is the length
	// of the node names of the rounds' clusters.
	migration, rounds bool
	nameLen           int
	skipProbe         bool
}

func main() {
	var cfg config
	sizes := flag.String("sizes", "10,100,1000,5000", "cluster sizes (Linux nodes)")
	flag.DurationVar(&cfg.rolloutStep, "rollout-step", 27*time.Millisecond,
		"time each node takes in a calico-node rollout (27ms stands for a real cluster's 27s, scaled down 1000 times)")
	flag.DurationVar(&cfg.statusLag, "status-lag", 100*time.Millisecond, "delay before a TigeraStatus shows a change")
	flag.DurationVar(&cfg.quiet, "quiet", time.Minute, "quiet window after Ready, at the largest size")
	flag.StringVar(&cfg.winready, "winready", "bin/winready", "the operator binary (make build)")
	flag.StringVar(&cfg.winreadyLog, "winready-log", "", "file to append winready's log to (default: discarded)")
	flag.StringVar(&cfg.kubectl, "kubectl", "bin/k8s/1.37.2/kubectl", "kubectl (make bench builds it)")
	only := flag.String("bench", "migration,rounds", "what to measure: the migration against the floor and the runbook, "+
		"and the rounds of the UDP probe and the pod network check")
	flag.IntVar(&cfg.nameLen, "name-length", 253, "length of the node names in the rounds' clusters (at most 253)")
	flag.BoolVar(&cfg.skipProbe, "skip-probe", false, "measure the pod network check's round alone (spec.preflight.skipNetworkProbe)")
	flag.Parse()
	for _, b := range strings.Split(*only, ",") {
		switch strings.TrimSpace(b) {
		case "migration":
			cfg.migration = true
		case "rounds":
			cfg.rounds = true
		default:
			fmt.Fprintln(os.Stderr, "bench: --bench takes migration and rounds, not", b)
			os.Exit(2)
		}
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "bench: bad size", s)
			os.Exit(2)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	logf.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type result struct {
	nodes                int
	floor, runbook, wall time.Duration
	// rollouts and replacements are the calico-node rollouts and pod
	// replacements each run forced.
	rollouts, runbookRollouts         int
	replacements, runbookReplacements int
	// stalled is winready's Stalled message with the default spec, if any.
	stalled string
	// longestWait is winready's longest calico-node rollout, and
	// longestGap its longest time without progress in one; both at the
	// simulated pace.
	longestWait, longestGap time.Duration
	p50, p95                time.Duration
	latencies               int
	reconciles              int
	// triggers are the passes by what woke them (winready_passes_total),
	// retries the workqueue's (workqueue_retries_total).
	triggers        map[string]float64
	retries         float64
	requests        map[string]int
	heapMiB, rssMiB float64
	quietWrites     int
	quietReconciles int
	quietMeasured   bool
}

func run(cfg config) (err error) {
	cfg.workdir, err = os.MkdirTemp("", "winready-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cfg.workdir)
	auditLog := filepath.Join(cfg.workdir, "audit.log")
	env, err := newEnvironment(cfg.workdir, auditLog)
	if err != nil {
		return err
	}
	restCfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	restCfg.QPS, restCfg.Burst = 1000, 2000

	kubeconfigs, err := writeKubeconfigs(env, restCfg, cfg.workdir)
	if err != nil {
		return err
	}
	agentIdentity, err := env.AddUser(envtest.User{Name: agentsUser, Groups: []string{"system:masters"}}, restCfg)
	if err != nil {
		return err
	}
	scheme, c, err := newClient(restCfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return err
	}
	simCfg := rest.CopyConfig(restCfg)
	simCfg.UserAgent = simUserAgent
	simMgr, sim, _, err := calicosim.NewManager(simCfg, scheme,
		calicosim.Options{RolloutStep: cfg.rolloutStep, StatusLag: cfg.statusLag}, operatorNamespace)
	if err != nil {
		return err
	}
	simDone := make(chan error, 1)
	go func() { simDone <- simMgr.Start(ctx) }()
	defer func() { cancel(); err = errors.Join(err, <-simDone) }()
	return measureAll(ctx, cfg, bench{c: c, sim: sim, kubeconfigs: kubeconfigs, auditLog: auditLog, restCfg: restCfg, agents: agentIdentity.Config()})
}

// newClient is a client of the bench's control plane with winready's scheme.
func newClient(restCfg *rest.Config) (*runtime.Scheme, client.WithWatch, error) {
	scheme, err := controllers.NewScheme()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	return scheme, c, err
}

// measureAll measures each size in turn, the migration and the rounds as
// cfg asks, and reports them, those measured before a failure too.
func measureAll(ctx context.Context, cfg config, b bench) error {
	var results []result
	var rounds []roundResult
	defer func() {
		if len(results) > 0 {
			report(cfg, results)
		}
		if len(rounds) > 0 {
			reportRounds(cfg, rounds)
		}
	}()
	for i, n := range cfg.sizes {
		if cfg.migration {
			fmt.Fprintf(os.Stderr, "bench: %d nodes\n", n)
			r, err := measure(ctx, cfg, b, n, i == len(cfg.sizes)-1)
			if err != nil {
				return fmt.Errorf("%d nodes: %w", n, err)
			}
			results = append(results, r)
		}
		if cfg.rounds {
			fmt.Fprintf(os.Stderr, "bench: rounds at %d nodes\n", n)
			r, err := measureRounds(ctx, cfg, b, n)
			if err != nil {
				return fmt.Errorf("rounds at %d nodes: %w", n, err)
			}
			rounds = append(rounds, r...)
		}
	}
	return nil
}

// newEnvironment is the control plane, configured to write every request
// auditPolicy records to auditLog.
func newEnvironment(workdir, auditLog string) (*envtest.Environment, error) {
	policy := filepath.Join(workdir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	env, err := kit.Environment(kit.Options{CalicoCRDs: filepath.Join("bin", "crds")})
	if err != nil {
		return nil, err
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", auditLog)
	args.Set("audit-log-mode", "blocking")
	// The scale of a large cluster: the simulator and winready are clients
	// like any other.
	args.Set("max-requests-inflight", "1000")
	return env, nil
}

// writeKubeconfigs writes a kubeconfig into workdir for each of the users
// winready and runbook (cluster admins, told apart in the audit log) and
// returns their paths by user.
func writeKubeconfigs(env *envtest.Environment, restCfg *rest.Config, workdir string) (map[string]string, error) {
	kubeconfigs := map[string]string{}
	for _, user := range []string{"winready", "runbook"} {
		u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, restCfg)
		if err != nil {
			return nil, err
		}
		kc, err := u.KubeConfig()
		if err != nil {
			return nil, err
		}
		kubeconfigs[user] = filepath.Join(workdir, user+".kubeconfig")
		if err := os.WriteFile(kubeconfigs[user], kc, 0o600); err != nil {
			return nil, err
		}
	}
	return kubeconfigs, nil
}

// auditPolicy records winready's and the runbook's every request, and the
// simulator's writes, with their timestamps; the ConfigMaps that winready and
// the agents write in the probe namespace with their content, for their size.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Request
  users: ["winready", "agents"]
  verbs: ["create", "update", "patch"]
  namespaces: ["winready-probe"]
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
  users: ["winready", "runbook", "agents"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
- level: None
`

func seed(ctx context.Context, c client.Client, n int) error {
	if err := clean(ctx, c); err != nil {
		return err
	}
	// A /12 of /26 blocks: one block per node under strictAffinity for 5,000
	// nodes and more, as a cluster of that size has (a /16 holds 1,024).
	cl := calicosim.MainClusterOf(n)
	cl.Pools[0].CIDR = "172.16.0.0/12"
	if err := calicosim.Seed(ctx, c, cl); err != nil {
		return err
	}
	return calicosim.WaitSettled(ctx, c, 10*time.Minute)
}

func clean(ctx context.Context, c client.Client) error {
	// winready is stopped between sizes: its finalizer and claims are
	// lifted here, as it would lift them.
	if err := kit.ForgetWindowsReadiness(ctx, c, operatorNamespace); err != nil {
		return err
	}
	// The record of the originals outlives its WindowsReadiness: left
	// there, the next size's migration would stop on a record it did not
	// write.
	rec := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: record.Name}}
	if err := client.IgnoreNotFound(c.Delete(ctx, rec)); err != nil {
		return err
	}
	// Thousands of nodes go in one collection delete, not one request each
	// within Clean's time limit; Clean then finds none left.
	if err := c.DeleteAllOf(ctx, &corev1.Node{}); err != nil {
		return err
	}
	return calicosim.Clean(ctx, c)
}

func serviceCIDR(ctx context.Context, c client.Client) (string, error) {
	list := &networkingv1.ServiceCIDRList{}
	if err := c.List(ctx, list); err != nil {
		return "", err
	}
	for _, sc := range list.Items {
		if len(sc.Spec.CIDRs) > 0 {
			return sc.Spec.CIDRs[0], nil
		}
	}
	return "", errors.New("no ServiceCIDR")
}

// bench is what every measurement shares: the uncached client, the
// simulator, the users' kubeconfigs and the API server's audit log.
type bench struct {
	c           client.WithWatch
	sim         *calicosim.Simulator
	kubeconfigs map[string]string
	auditLog    string
	// restCfg is the control plane's admin; agents the simulated agents'
	// identity.
	restCfg, agents *rest.Config
}

// simUserAgent tells the simulated Calico's requests apart in the audit log:
// it runs as the control plane's admin, as the bench's own client does.
const simUserAgent = "calicosim"

// calicoNode names the DaemonSet whose rollouts are counted.
const calicoNodeNS, calicoNodeName = "calico-system", "calico-node"

func measure(ctx context.Context, cfg config, b bench, n int, last bool) (result, error) {
	r := result{nodes: n}
	// One calico-node rollout of n nodes (BGP off and the services endpoint
	// together), and one status lag for each change Calico must report:
	// pools, the calico-node change, serviceCIDRs, Windows dataplane.
	r.floor = time.Duration(n)*cfg.rolloutStep + 4*cfg.statusLag

	if err := seed(ctx, b.c, n); err != nil {
		return r, err
	}
	before := b.sim.Rollouts(calicoNodeNS, calicoNodeName)
	start := time.Now()
	if err := runRunbook(ctx, cfg, b); err != nil {
		return r, err
	}
	r.runbook = time.Since(start)
	after := b.sim.Rollouts(calicoNodeNS, calicoNodeName)
	r.runbookRollouts, r.runbookReplacements = after.Rollouts-before.Rollouts, after.Replacements-before.Replacements

	if err := seed(ctx, b.c, n); err != nil {
		return r, err
	}
	op, err := startWinready(ctx, cfg, b.kubeconfigs["winready"])
	if err != nil {
		return r, err
	}
	defer op.stop()
	before = b.sim.Rollouts(calicoNodeNS, calicoNodeName)
	if err := runWinready(ctx, b, op, &r); err != nil {
		return r, err
	}
	after = b.sim.Rollouts(calicoNodeNS, calicoNodeName)
	r.rollouts, r.replacements = after.Rollouts-before.Rollouts, after.Replacements-before.Replacements
	if last && cfg.quiet > 0 && r.stalled == "" {
		return r, measureQuiet(cfg, b, op, &r)
	}
	return r, nil
}

func runRunbook(ctx context.Context, cfg config, b bench) error {
	cidr, err := serviceCIDR(ctx, b.c)
	if err != nil {
		return err
	}
	runbook := exec.CommandContext(ctx, "bash", "hack/runbook.sh", "10.0.0.10", "6443", cidr)
	runbook.Env = append(os.Environ(), "KUBECONFIG="+b.kubeconfigs["runbook"], "KUBECTL="+cfg.kubectl)
	if out, err := runbook.CombinedOutput(); err != nil {
		return fmt.Errorf("the scripted runbook: %w\n%s", err, out)
	}
	return nil
}

// runWinready creates the default WindowsReadiness (the network probe
// skipped: the runbook has none) and waits for Ready or Stalled, watching
// calico-node's rollouts meanwhile; then it reads winready's costs.
func runWinready(ctx context.Context, b bench, op *winready, r *result) error {
	// Absent until the first reconcile: zero.
	reconcilesBefore, _ := op.metric("controller_runtime_reconcile_total", `controller="windowsreadiness"`)
	retriesBefore, _ := op.metric("workqueue_retries_total", `name="windowsreadiness"`)
	triggersBefore, err := op.byLabel("winready_passes_total", "trigger")
	if err != nil {
		return err
	}
	mark, err := auditlog.Size(b.auditLog)
	if err != nil {
		return err
	}
	w, err := b.c.Watch(ctx, &v1alpha1.WindowsReadinessList{})
	if err != nil {
		return err
	}
	defer w.Stop()
	trace, err := watchRollouts(ctx, b.c)
	if err != nil {
		return err
	}
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
		Spec: v1alpha1.WindowsReadinessSpec{Preflight: v1alpha1.PreflightSpec{SkipNetworkProbe: true},
			// The benchmark measures rollouts and API load; the pod network
			// check has its own benchmark (BenchmarkPodCheckRound).
			PodNetworkCheck: v1alpha1.PodNetworkCheckSpec{Disabled: true}}}
	start := time.Now()
	if err := b.c.Create(ctx, wr); err != nil {
		return err
	}
	if r.stalled, err = waitReadyOrStalled(w); err != nil {
		return err
	}
	r.wall = time.Since(start)
	r.longestWait, r.longestGap = trace.stop()
	reconcilesAfter, err := op.metric("controller_runtime_reconcile_total", `controller="windowsreadiness"`)
	if err != nil {
		return err
	}
	r.reconciles = int(reconcilesAfter - reconcilesBefore)
	retriesAfter, _ := op.metric("workqueue_retries_total", `name="windowsreadiness"`)
	r.retries = retriesAfter - retriesBefore
	if r.triggers, err = op.byLabel("winready_passes_total", "trigger"); err != nil {
		return err
	}
	for k, v := range triggersBefore {
		r.triggers[k] -= v
	}
	return readCosts(b, op, mark, r)
}

func waitReadyOrStalled(w watch.Interface) (stalled string, err error) {
	timeout := time.After(30 * time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			got, ok := ev.Object.(*v1alpha1.WindowsReadiness)
			switch {
			case ok && got.Status.Phase == v1alpha1.PhaseReady:
				return "", nil
			case ok && got.Status.Phase == v1alpha1.PhaseStalled:
				if meta.IsStatusConditionFalse(got.Status.Conditions, conditions.PreflightPassed) {
					// The bench measures migrations: a cluster its preflight
					// refuses is the bench's mistake, not a figure.
					return "", fmt.Errorf("the bench's cluster fails winready's preflight: %s", got.Status.Message)
				}
				return got.Status.Message, nil
			}
		case <-timeout:
			return "", errors.New("neither Ready nor Stalled after 30 minutes")
		}
	}
}

// readCosts reads winready's requests from the audit log from mark on, and
// its memory.
func readCosts(b bench, op *winready, mark int64, r *result) error {
	events, err := auditlog.Read(b.auditLog, mark, 0)
	if err != nil {
		return err
	}
	r.requests = requestsBy(events, "winready")
	lat := eventToPatch(events)
	r.latencies = len(lat)
	r.p50, r.p95 = auditlog.Percentile(lat, 50), auditlog.Percentile(lat, 95)
	heap, err := op.metric("go_memstats_heap_inuse_bytes", "")
	if err != nil {
		return err
	}
	r.heapMiB = heap / (1 << 20)
	r.rssMiB, err = rssMiB(op.cmd.Process.Pid)
	return err
}

// measureQuiet counts winready's writes and reconciles in a window after
// Ready, once the last status lag has passed.
func measureQuiet(cfg config, b bench, op *winready, r *result) error {
	time.Sleep(2*time.Second + 5*cfg.statusLag) // a settling window, not a wait for a condition
	mark, err := auditlog.Size(b.auditLog)
	if err != nil {
		return err
	}
	before, _ := op.metric("controller_runtime_reconcile_total", `controller="windowsreadiness"`)
	time.Sleep(cfg.quiet) // a measurement window, not a wait for a condition
	after, _ := op.metric("controller_runtime_reconcile_total", `controller="windowsreadiness"`)
	events, err := auditlog.Read(b.auditLog, mark, 0)
	if err != nil {
		return err
	}
	for k, v := range requestsBy(events, "winready") {
		if verb := strings.Fields(k)[0]; verb != "get" && verb != "list" && verb != "watch" {
			r.quietWrites += v
		}
	}
	r.quietReconciles = int(after - before)
	r.quietMeasured = true
	return nil
}

// winready is the operator binary running against the bench's control plane.
type winready struct {
	cmd     *exec.Cmd
	metrics string
}

func startWinready(ctx context.Context, cfg config, kubeconfig string) (*winready, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	// Plain HTTP: the bench reads the metrics itself, as a local demo would.
	// Its control plane has none of winready's admission policies, which
	// the bench does not measure: winready runs without waiting for them.
	cmd := exec.CommandContext(ctx, cfg.winready, "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", addr, "--metrics-secure=false", "--health-probe-bind-address", "0", "--namespace", operatorNamespace,
		"--probe-image", "winready:bench", "--require-admission-policies=false")
	cmd.Stderr = io.Discard
	cmd.Stdout = io.Discard
	if cfg.winreadyLog != "" {
		f, err := os.OpenFile(cfg.winreadyLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child holds its own descriptor
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (run make build): %w", cfg.winready, err)
	}
	op := &winready{cmd: cmd, metrics: "http://" + addr + "/metrics"}
	// Started means its caches have synced and its workers run, as for an
	// operator that was installed before the migration is asked for.
	for i := 0; ; i++ {
		if _, err := op.metric("controller_runtime_active_workers", `controller="windowsreadiness"`); err == nil {
			return op, nil
		}
		if i > 300 {
			op.stop()
			return nil, errors.New("winready's metrics endpoint did not come up")
		}
		time.Sleep(100 * time.Millisecond) // polling a process start-up
	}
}

func (w *winready) stop() {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	_ = w.cmd.Wait()
}

// sample is one line of the metrics endpoint: its labels ("" or "{...}")
// and its value.
type sample struct {
	labels string
	value  float64
}

// samples reads the samples of metric name from winready's metrics endpoint.
func (w *winready) samples(name string) ([]sample, error) {
	resp, err := http.Get(w.metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		labels, _, _ := strings.Cut(rest, "}")
		out = append(out, sample{labels: labels, value: v})
	}
	return out, sc.Err()
}

// metric sums the samples of a metric whose labels contain match.
func (w *winready) metric(name, match string) (float64, error) {
	all, err := w.samples(name)
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for _, smp := range all {
		if strings.Contains(smp.labels, match) {
			sum += smp.value
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("no metric %s{%s}", name, match)
	}
	return sum, nil
}

// byLabel reads the samples of a metric by the value of one label.
func (w *winready) byLabel(name, label string) (map[string]float64, error) {
	all, err := w.samples(name)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, smp := range all {
		if strings.Contains(smp.labels, label+`="`) {
			out[labelOf(smp.labels, label)] += smp.value
		}
	}
	return out, nil
}

func rssMiB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

type auditEvent = auditlog.Event

func requestsBy(events []auditEvent, user string) map[string]int {
	counts := map[string]int{}
	for _, ev := range events {
		if ev.User.Username != user {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		counts[ev.Verb+" "+res]++
	}
	return counts
}

// eventToPatch is, for each change winready makes to Calico after its
// first, the time from the simulated Calico's last status report that ended
// before the change was received (the report that let the previous step
// finish: a TigeraStatus, the Installation's status, calico-node's rollout)
// to the change. The log is in the order requests completed, so a report
// that ended while the change was in flight comes before it and is passed
// over. Each report answers one change at most: the rest of a batch answer
// the same report, and a change with no report since the last one paired
// was not waiting for Calico.
func eventToPatch(events []auditEvent) []time.Duration {
	var lat []time.Duration
	var reports []*auditEvent // the simulator's status writes, in the log's order
	paired := -1              // the last report paired with a change
	changed := false          // whether winready made its first change
	for i := range events {
		ev := &events[i]
		if !isWrite(ev.Verb) || ev.ResponseStatus.Code >= 300 {
			continue
		}
		switch {
		case strings.HasPrefix(ev.UserAgent, simUserAgent) && ev.ObjectRef.Subresource == "status":
			reports = append(reports, ev)
		case ev.User.Username == "winready" && calicoResource(ev):
			last := len(reports) - 1
			for last > paired && !reports[last].Done.Before(&ev.Received) {
				last--
			}
			if changed && last > paired {
				lat = append(lat, ev.Received.Sub(reports[last].Done.Time))
			}
			changed, paired = true, max(paired, last)
		}
	}
	return lat
}

func isWrite(verb string) bool {
	return verb == "create" || verb == "update" || verb == "patch" || verb == "delete"
}

func calicoResource(ev *auditEvent) bool {
	switch ev.ObjectRef.Resource {
	case "installations", "ipamconfigurations":
		return ev.ObjectRef.Subresource == ""
	case "configmaps":
		return ev.ObjectRef.Namespace == "tigera-operator"
	}
	return false
}

// realPace is the per-node time of a real cluster's calico-node rollout at
// maxUnavailable 1 that the simulated pace stands for.
const realPace = 27 * time.Second

func report(cfg config, results []result) {
	scale := float64(realPace) / float64(cfg.rolloutStep)
	fmt.Printf("\nwinready benchmark: rollout %s per node (standing for %s: times x%.0f), TigeraStatus lag %s, "+
		"network probe skipped (the runbook has none)\n\n", cfg.rolloutStep, realPace, scale, cfg.statusLag)
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tfloor\trunbook\twinready\tx floor\tx runbook\trollouts winready/runbook\tpods replaced\tStalled\t"+
		"longest rollout at 27s/node\tlongest gap at 27s/node\tcanary at 27s/node\treq/node\treconciles\tevent->patch p50\tp95\theap MiB\tRSS MiB\t")
	for _, r := range results {
		total := 0
		for _, v := range r.requests {
			total += v
		}
		stalled := "no"
		if r.stalled != "" {
			stalled = "YES"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.3f\t%.3f\t%d/%d\t%d/%d\t%s\t%s\t%s\t%s\t%.1f\t%d\t%s\t%s\t%.1f\t%.1f\t\n", r.nodes,
			r.floor.Round(time.Millisecond), r.runbook.Round(time.Millisecond), r.wall.Round(time.Millisecond),
			r.wall.Seconds()/r.floor.Seconds(), r.wall.Seconds()/r.runbook.Seconds(),
			r.rollouts, r.runbookRollouts, r.replacements, r.runbookReplacements, stalled,
			rollout.Human(time.Duration(float64(r.longestWait)*scale)), rollout.Human(time.Duration(float64(r.longestGap)*scale)),
			canaryCost(r.nodes), float64(total)/float64(r.nodes), r.reconciles,
			r.p50.Round(time.Millisecond), r.p95.Round(time.Millisecond), r.heapMiB, r.rssMiB)
	}
	_ = tw.Flush()
	fmt.Printf("\ncanary: what spec.rollout.canary's %d nodes, one at a time, add to one rollout at maxUnavailable %s and %s a node "+
		"(the rollout's length with the canary, and the time added; computed from the pace: the canary's check runs while the "+
		"rollout goes on, so it adds none)\n", v1alpha1.DefaultCanaryNodes, canarySpeed.String(), realPace)
	for _, r := range results {
		if r.stalled != "" {
			fmt.Printf("\nStalled at %d nodes: %s\n", r.nodes, r.stalled)
		}
	}
	reportTargets(scale, results)
	reportTriggers(results)
	reportRequests(cfg, results[len(results)-1])
}

// reportTargets says, for each target, whether this run met it. A 30m
// deadline on a step's total time fails where the longest rollout at the real
// pace exceeds it; a 30m progress deadline where the longest gap does.
func reportTargets(scale float64, results []result) {
	fmt.Println("\ntargets:")
	for _, r := range results {
		realWait := time.Duration(float64(r.longestWait) * scale)
		realGap := time.Duration(float64(r.longestGap) * scale)
		fmt.Printf("  %5d nodes: one rollout %v; wall <= 0.55 runbook %v; not Stalled %v; at 27s/node a 30m total-time limit %s, a 30m progress deadline %s; heap < 64 MiB %v\n",
			r.nodes, r.rollouts == 1, r.wall.Seconds() <= 0.55*r.runbook.Seconds(), r.stalled == "",
			verdict(realWait > 30*time.Minute), verdict(realGap > 30*time.Minute), r.heapMiB < 64)
	}
}

func verdict(stalls bool) string {
	if stalls {
		return "stalls"
	}
	return "holds"
}

// reportTriggers prints, for each size, the passes by what woke them and the
// workqueue's retries.
func reportTriggers(results []result) {
	fmt.Println("\npasses by trigger (winready_passes_total; a pass several events woke counts for the first):")
	for _, r := range results {
		keys := make([]string, 0, len(r.triggers))
		for k, v := range r.triggers {
			if v > 0 {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, r.triggers[k]))
		}
		fmt.Printf("  %5d nodes: %s; workqueue_retries_total %.0f\n", r.nodes, strings.Join(parts, ", "), r.retries)
	}
}

func reportRequests(cfg config, lastRes result) {
	fmt.Printf("\nAPI requests by winready during the migration at %d nodes:\n", lastRes.nodes)
	keys := make([]string, 0, len(lastRes.requests))
	for k := range lastRes.requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-50s %d\n", k, lastRes.requests[k])
	}
	if lastRes.quietMeasured {
		fmt.Printf("\nquiet window of %s after Ready at %d nodes: %d writes, %d reconciles\n",
			cfg.quiet, lastRes.nodes, lastRes.quietWrites, lastRes.quietReconciles)
	}
}

// canarySpeed is the spec.rollout.maxUnavailable the canary column assumes:
// a rollout of a tenth of the nodes at a time.
var canarySpeed = intstr.FromString("10%")

// canaryCost is the length of one calico-node rollout over nodes at the
// real pace with the default canary, and what the canary adds to it.
func canaryCost(nodes int) string {
	with := rollout.Length(nodes, canarySpeed, v1alpha1.DefaultCanaryNodes, realPace)
	without := rollout.Length(nodes, canarySpeed, 0, realPace)
	return fmt.Sprintf("%s (+%s)", rollout.Human(with), rollout.Human(with-without))
}
