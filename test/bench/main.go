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
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/rollout"
	"github.com/winready/winready/test/auditlog"
	"github.com/winready/winready/test/calicosim"
)

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
