package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/test/auditlog"
	"github.com/winready/winready/test/calicosim"
)

// roundResult is one round of one check at one size: the UDP 4789 probe's,
// or the pod network check's baseline.
type roundResult struct {
	check   string
	nodes   int
	nameLen int
	// wall is from the manager's first write of the round to the status
	// that records its outcome, as the API server and a watch see them.
	wall time.Duration
	// managerWrites and agentWrites are write requests in the probe
	// namespace; deletes counts the deletes among them.
	managerWrites, agentWrites, deletes int
	// agentBytes is what the agents read from their connections to the API
	// server: every response, watch streams, write responses, headers and
	// TLS included; agentReads the bodies of their reads (gets, lists and
	// watch streams) alone.
	agentBytes, agentReads int64
	// serverBytes is the API server's own count of the bytes it sent in
	// reads of ConfigMaps and Secrets (apiserver_response_sizes) and in
	// their watch events (apiserver_watch_events_sizes), to every client:
	// the agents and the manager's cache.
	serverBytes float64
	// largest is the largest ConfigMap or Secret the round wrote, as the
	// request's JSON; refused is the API server's answer to the largest
	// write it refused, if any.
	largest int
	refused string
	outcome string
	// passes are winready's passes from the WindowsReadiness's creation to
	// both rounds done, and what they read and wrote (the same for both
	// rows of a size).
	passes passCosts
}

// passCosts are the passes of a stretch of winready's work and their reads
// and writes: reads as winready counts them (winready_reads_total), through
// its cache and past it; writes as the API server's audit log records them
// (winready's status writes included).
type passCosts struct {
	passes                   int
	cached, pastCache, nodes float64
	// pastCacheBy are the reads past the cache by kind and verb.
	pastCacheBy map[string]float64
	writes      int
}

// passCounters reads winready's counters of passes and reads; a counter
// with no sample yet reads 0.
func passCounters(op *winready) passCosts {
	read := func(name, match string) float64 {
		v, _ := op.metric(name, match)
		return v
	}
	by := map[string]float64{}
	all, _ := op.samples("winready_reads_total")
	for _, smp := range all {
		if strings.Contains(smp.labels, `source="apiserver"`) {
			by[labelOf(smp.labels, "kind")+" "+labelOf(smp.labels, "verb")] += smp.value
		}
	}
	return passCosts{
		passes:      int(read("controller_runtime_reconcile_total", `controller="windowsreadiness"`)),
		cached:      read("winready_reads_total", `source="cache"`),
		pastCache:   read("winready_reads_total", `source="apiserver"`),
		nodes:       read("winready_reads_total", `kind="Node",source="apiserver",verb="list"`),
		pastCacheBy: by,
	}
}

// since is what the passes cost after before; writes are counted apart.
func (c passCosts) since(before passCosts) passCosts {
	by := map[string]float64{}
	for k, v := range c.pastCacheBy {
		if d := v - before.pastCacheBy[k]; d > 0 {
			by[k] = d
		}
	}
	return passCosts{passes: c.passes - before.passes, cached: c.cached - before.cached,
		pastCache: c.pastCache - before.pastCache, nodes: c.nodes - before.nodes, pastCacheBy: by}
}

// pastCacheList lists the reads past the cache by kind and verb, most first.
func (c passCosts) pastCacheList() string {
	keys := slices.Collect(maps.Keys(c.pastCacheBy))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(c.pastCacheBy[b], c.pastCacheBy[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, c.pastCacheBy[k]))
	}
	return strings.Join(parts, ", ")
}

// perPass is v per pass of c.
func (c passCosts) perPass(v float64) float64 {
	if c.passes == 0 {
		return 0
	}
	return v / float64(c.passes)
}

// winreadyWrites counts winready's write requests in the audit log.
func winreadyWrites(events []auditEvent) int {
	n := 0
	for _, ev := range events {
		if ev.User.Username == "winready" && (isWrite(ev.Verb) || ev.Verb == "deletecollection") {
			n++
		}
	}
	return n
}

// seedRounds seeds n Linux nodes named with nameLen characters (0: linux-N),
// in a pool with a block for each.
func seedRounds(ctx context.Context, c client.Client, n, nameLen int) ([]calicosim.Node, error) {
	if err := clean(ctx, c); err != nil {
		return nil, err
	}
	cl := calicosim.MainClusterOf(n)
	cl.Pools[0].CIDR = "172.16.0.0/12"
	for i := range cl.Nodes {
		cl.Nodes[i].Name = nodeName(i, nameLen)
	}
	if err := calicosim.Seed(ctx, c, cl); err != nil {
		return nil, err
	}
	return cl.Nodes, calicosim.WaitSettled(ctx, c, 10*time.Minute)
}

// nodeName is node i's name: linux-i, or a fully qualified name of exactly
// length characters, DNS labels of at most 63 hexadecimal characters that
// differ from node to node as a cloud's do, so that they compress no better.
func nodeName(i, length int) string {
	short := fmt.Sprintf("linux-%d", i)
	if length <= len(short) {
		return short
	}
	var b strings.Builder
	b.WriteString(short)
	for seq := 0; b.Len() < length; seq++ {
		label := min(63, length-b.Len()-1)
		if label <= 0 {
			b.WriteString("x")
			continue
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d", i, seq))
		b.WriteString(".")
		b.WriteString(strings.Repeat(hex.EncodeToString(sum[:]), 2)[:label])
	}
	return b.String()
}

// measureRounds runs winready on n nodes until the UDP probe's round and
// the pod network check's baseline are done, agents playing on every node,
// and reads their costs.
func measureRounds(ctx context.Context, cfg config, b bench, n int) (results []roundResult, err error) {
	nodes, err := seedRounds(ctx, b.c, n, cfg.nameLen)
	if err != nil {
		return nil, err
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	f := newFleet(b.agents, nodes)
	fleetCtx, stopFleet := context.WithCancel(ctx)
	defer stopFleet()
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- f.run(fleetCtx, b.c) }()
	defer func() {
		stopFleet()
		if ferr := <-fleetDone; ferr != nil && fleetCtx.Err() == nil {
			err = errors.Join(err, ferr)
		}
	}()
	return measureRoundsWith(ctx, cfg, b, f, nodes, n)
}

// measureRoundsWith is measureRounds once the nodes are seeded and the
// agents play.
func measureRoundsWith(ctx context.Context, cfg config, b bench, f *fleet, nodes []calicosim.Node, n int) ([]roundResult, error) {
	op, err := startWinready(ctx, cfg, b.kubeconfigs["winready"])
	if err != nil {
		return nil, err
	}
	defer op.stop()
	mark, err := auditlog.Size(b.auditLog)
	if err != nil {
		return nil, err
	}
	before, err := serverBytes(ctx, b.restCfg)
	if err != nil {
		return nil, err
	}
	passesBefore := passCounters(op)
	w, err := b.c.Watch(ctx, &v1alpha1.WindowsReadinessList{})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	// Approval holds the migration before its first disruptive step, after
	// both rounds.
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
		Spec: v1alpha1.WindowsReadinessSpec{RequireApproval: true, Preflight: v1alpha1.PreflightSpec{SkipNetworkProbe: cfg.skipProbe}}}
	if err := b.c.Create(ctx, wr); err != nil {
		return nil, err
	}
	probeDone, baselineDone, outcome, err := waitRounds(w)
	if err != nil {
		return nil, err
	}
	passes := passCounters(op).since(passesBefore)
	after, err := serverBytes(ctx, b.restCfg)
	if err != nil {
		return nil, err
	}
	events, err := auditlog.Read(b.auditLog, mark, 0)
	if err != nil {
		return nil, err
	}
	probe, check := splitRounds(events)
	results := []roundResult{
		roundCosts("UDP probe", probe, probeDone, f.bytes(probeAgents)),
		roundCosts("pod check", check, baselineDone, f.bytes(podCheckAgents)),
	}
	results[0].agentReads, results[1].agentReads = f.reads(probeAgents), f.reads(podCheckAgents)
	passes.writes = winreadyWrites(events)
	for i := range results {
		results[i].nodes, results[i].nameLen, results[i].outcome = n, len(nodes[0].Name), outcome
		results[i].passes = passes
	}
	// Both rounds' reads, as the API server counts them.
	results[0].serverBytes = after - before
	return results, nil
}

// waitRounds follows the WindowsReadiness until both rounds are done or it
// stalls, and says when each round's outcome was first seen.
func waitRounds(w watch.Interface) (probe, baseline time.Time, outcome string, err error) {
	timeout := time.After(30 * time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			wr, ok := ev.Object.(*v1alpha1.WindowsReadiness)
			if !ok {
				continue
			}
			st := wr.Status
			if probe.IsZero() && st.Preflight != nil && st.Preflight.Probe != nil && (st.Preflight.Probe.CompletedAt != nil || st.Preflight.Probe.Skipped) {
				probe = time.Now()
			}
			if pc := st.PodNetworkCheck; baseline.IsZero() && pc != nil && pc.Baseline != nil && pc.Baseline.CompletedAt != nil {
				baseline = time.Now()
			}
			switch {
			case st.Phase == v1alpha1.PhaseStalled:
				return probe, baseline, "Stalled: " + st.Message, nil
			case !probe.IsZero() && !baseline.IsZero():
				return probe, baseline, "passed", nil
			}
		case <-timeout:
			return probe, baseline, "", errors.New("the rounds neither finished nor stalled in 30 minutes")
		}
	}
}

// splitRounds keeps the writes of the manager and the agents in the probe
// namespace, and splits them at the pod network check's first.
func splitRounds(events []auditEvent) (probe, check []auditEvent) {
	inCheck := false
	for _, ev := range events {
		if ev.ObjectRef.Namespace != probeNamespace || !isWrite(ev.Verb) && ev.Verb != "deletecollection" ||
			ev.User.Username != "winready" && ev.User.Username != agentsUser {
			continue
		}
		inCheck = inCheck || strings.Contains(ev.ObjectRef.Name, "podcheck") || strings.Contains(ev.RequestURI, "podcheck")
		if inCheck {
			check = append(check, ev)
		} else {
			probe = append(probe, ev)
		}
	}
	return probe, check
}

func roundCosts(check string, events []auditEvent, done time.Time, agentBytes int64) roundResult {
	r := roundResult{check: check, agentBytes: agentBytes}
	if len(events) == 0 {
		return r
	}
	if !done.IsZero() {
		r.wall = done.Sub(events[0].Received.Time)
	}
	largestRefused := 0
	for _, ev := range events {
		if ev.User.Username == agentsUser {
			r.agentWrites++
		} else {
			r.managerWrites++
		}
		if ev.Verb == "delete" || ev.Verb == "deletecollection" {
			r.deletes++
		}
		size := len(ev.RequestObject)
		switch {
		case ev.ResponseStatus.Code < 300:
			r.largest = max(r.largest, size)
		case size > largestRefused:
			largestRefused = size
			r.refused = fmt.Sprintf("%d B %s refused: %s", size, ev.ObjectRef.Resource, ev.ResponseStatus.Message)
		}
	}
	return r
}

// serverBytes sums the API server's counts of bytes sent in reads and watch
// events of ConfigMaps and Secrets.
func serverBytes(ctx context.Context, cfg *rest.Config) (float64, error) {
	rc, err := rest.UnversionedRESTClientFor(withScheme(cfg))
	if err != nil {
		return 0, err
	}
	body, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_response_sizes_sum{") && !strings.HasPrefix(line, "apiserver_watch_events_sizes_sum{") {
			continue
		}
		if !strings.Contains(line, `resource="configmaps"`) && !strings.Contains(line, `resource="secrets"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum, nil
}

func withScheme(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return c
}

// agentsUser is the identity the simulated agents write with.
const agentsUser = "agents"

// The DaemonSets whose agents the fleet plays.
const (
	probeAgents    = "winready-probe"
	podCheckAgents = "winready-podcheck"
)

// fleet plays the agents of winready's rounds on every Linux node: when a
// round's DaemonSet appears, an agent starts on each node, reads what the
// real agent reads and writes what it writes, through connections of its
// kind whose bytes are counted; when the DaemonSet goes, they stop. At most
// burstLimit of their requests run at once, as pods come up over a while.
type fleet struct {
	cfg   *rest.Config
	nodes []calicosim.Node

	mu      sync.Mutex
	running map[string]context.CancelFunc
	counted map[string]*atomic.Int64
	read    map[string]*atomic.Int64
	clients map[string]client.WithWatch
}

const burstLimit = 100

func newFleet(cfg *rest.Config, nodes []calicosim.Node) *fleet {
	f := &fleet{cfg: cfg, nodes: nodes, running: map[string]context.CancelFunc{}, counted: map[string]*atomic.Int64{},
		read: map[string]*atomic.Int64{}, clients: map[string]client.WithWatch{}}
	for _, kind := range []string{probeAgents, podCheckAgents} {
		f.counted[kind], f.read[kind] = &atomic.Int64{}, &atomic.Int64{}
	}
	return f
}

func (f *fleet) bytes(kind string) int64 { return f.counted[kind].Load() }
func (f *fleet) reads(kind string) int64 { return f.read[kind].Load() }

// client is the agents' client of kind, its bytes counted.
func (f *fleet) client(kind string) (client.WithWatch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.clients[kind]; c != nil {
		return c, nil
	}
	cfg := rest.CopyConfig(f.cfg)
	cfg.QPS, cfg.Burst = -1, 0
	counter := f.counted[kind]
	dialer := &net.Dialer{}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, n: counter}, nil
	}
	reads := f.read[kind]
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		rt = burst(burstLimit, rt)
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodGet {
				resp.Body = &countingBody{ReadCloser: resp.Body, n: reads}
			}
			return resp, err
		})
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return nil, err
	}
	f.clients[kind] = c
	return c, nil
}

// countingBody counts the bytes of a response's body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// run starts and stops agents as the rounds' DaemonSets come and go.
func (f *fleet) run(ctx context.Context, c client.WithWatch) error {
	w, err := c.Watch(ctx, &appsv1.DaemonSetList{}, client.InNamespace(probeNamespace))
	if err != nil {
		return err
	}
	defer w.Stop()
	var agents sync.WaitGroup
	defer agents.Wait()
	defer f.stopAll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			ds, isDS := ev.Object.(*appsv1.DaemonSet)
			if !isDS || f.counted[ds.Name] == nil {
				continue
			}
			switch ev.Type {
			case watch.Added:
				f.start(ctx, ds, &agents)
			case watch.Deleted:
				f.stop(ds.Name)
			}
		}
	}
}

func (f *fleet) start(ctx context.Context, ds *appsv1.DaemonSet, agents *sync.WaitGroup) {
	c, err := f.client(ds.Name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: agents:", err)
		return
	}
	f.stop(ds.Name)
	ctx, cancel := context.WithCancel(ctx)
	f.mu.Lock()
	f.running[ds.Name] = cancel
	f.mu.Unlock()
	net := &network{}
	for _, n := range f.nodes {
		agents.Go(func() {
			var err error
			switch ds.Name {
			case probeAgents:
				err = runProbeAgent(ctx, c, n, net)
			case podCheckAgents:
				err = runPodCheckAgent(ctx, c, ds, n)
			}
			if err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "bench: %s agent on %s: %v\n", ds.Name, n.Name, err)
			}
		})
	}
}

func (f *fleet) stop(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cancel := f.running[kind]; cancel != nil {
		cancel()
		delete(f.running, kind)
	}
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cancel := range f.running {
		cancel()
	}
}

func reportRounds(cfg config, results []roundResult) {
	fmt.Printf("\nrounds: the UDP probe and the pod network check's baseline, agents simulated on every node through the API server\n\n")
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "check\tnodes\tname length\twall\twrites/node\tmanager writes\tagent writes\tdeletes\t"+
		"to agents\tper agent\tof which reads\tper agent\tAPI server CM+Secret reads (all clients)\tlargest object\toutcome\t")
	for _, r := range results {
		server := "-"
		if r.serverBytes > 0 {
			server = mib(int64(r.serverBytes))
		}
		largest := fmt.Sprintf("%.1f KiB", float64(r.largest)/1024)
		if r.refused != "" {
			largest += " (" + r.refused + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.2f\t%d\t%d\t%d\t%s\t%.0f B\t%s\t%.0f B\t%s\t%s\t%s\t\n", r.check, r.nodes, r.nameLen,
			r.wall.Round(100*time.Millisecond), float64(r.managerWrites+r.agentWrites)/float64(r.nodes), r.managerWrites,
			r.agentWrites, r.deletes, mib(r.agentBytes), float64(r.agentBytes)/float64(r.nodes), mib(r.agentReads),
			float64(r.agentReads)/float64(r.nodes), server, largest, bounded(r.outcome, 120))
	}
	_ = tw.Flush()
	fmt.Printf("\nwinready's passes while the rounds ran (from the WindowsReadiness's creation to both rounds done): reads as winready\n" +
		"counts them (through its cache, past it; Node lists past the cache of which), writes as the audit log records them\n\n")
	tw = tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tpasses\tcached reads/pass\treads past the cache/pass\tNode lists past the cache\twrites/pass\t")
	var by []string
	for _, r := range results {
		if r.check != results[0].check {
			continue
		}
		p := r.passes
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.1f\t%.0f\t%.1f\t\n", r.nodes, p.passes, p.perPass(p.cached), p.perPass(p.pastCache), p.nodes,
			p.perPass(float64(p.writes)))
		by = append(by, fmt.Sprintf("%d nodes: %s", r.nodes, p.pastCacheList()))
	}
	_ = tw.Flush()
	fmt.Printf("\nreads past the cache by kind and verb\n  %s\n", strings.Join(by, "\n  "))
	_ = cfg
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
