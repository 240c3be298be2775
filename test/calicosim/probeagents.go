package calicosim

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

// ProbeAgents plays winready's UDP 4789 probe agents on simulated nodes:
// when the probe DaemonSet appears it reads the round's plans and writes
// each node's report through the API, as the real agents do, with the
// probes a test has blocked left out. An agent a test made late comes up
// that long after its round's start: its probes reach a peer, and its
// peers' reach it, only when their windows overlap as the real agents'
// windows do (probe.Window).
type ProbeAgents struct {
	// Namespace is the probe namespace, where rounds run.
	Namespace string

	client client.Client
	reader client.Reader
	// api is what the agents read their plans and key from: the API server,
	// as a real agent reads them, rather than the simulator's cache.
	api client.Reader

	mu      sync.Mutex
	blocked map[[2]netip.Addr]bool
	silent  map[string]bool
	late    map[string]time.Duration
	played  map[round.ID]bool
	// writers, when set, gives the client each node's agent writes its
	// report with, as real agents write with their pod's token.
	writers func(node string) client.Client
}

// NewProbeAgents returns simulated agents for rounds in namespace.
func NewProbeAgents(namespace string) *ProbeAgents {
	a := &ProbeAgents{Namespace: namespace}
	a.Reset()
	return a
}

// Block makes probes from one address to another get lost, as a firewall
// dropping UDP 4789 in that direction would.
func (a *ProbeAgents) Block(from, to netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.blocked[[2]netip.Addr{from, to}] = true
}

// Silence makes a node's agent never report, as one that cannot start would.
func (a *ProbeAgents) Silence(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.silent[node] = true
}

// Late makes a node's agent come up by after its round's start, as one
// whose image pull was slow.
func (a *ProbeAgents) Late(node string, by time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.late[node] = by
}

// Reset clears blocked pairs, silenced and late nodes and per-node writers.
func (a *ProbeAgents) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.blocked, a.silent, a.late, a.writers = map[[2]netip.Addr]bool{}, map[string]bool{}, map[string]time.Duration{}, nil
	a.played = map[round.ID]bool{}
}

// WriteAs makes each node's agent write its report with the client that
// writer returns for the node (such as one holding a token bound to a pod on
// that node) instead of the simulator's own.
func (a *ProbeAgents) WriteAs(writer func(node string) client.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writers = writer
}

// SetupWithManager registers the agents on mgr: the probe DaemonSet and
// its plans wake them.
func (a *ProbeAgents) SetupWithManager(mgr ctrl.Manager) error {
	a.client, a.reader, a.api = mgr.GetClient(), newCachedReader(mgr), mgr.GetAPIReader()
	plans := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, plan := o.GetLabels()[round.PlanLabel]
		return o.GetNamespace() == a.Namespace && plan && o.GetLabels()[round.ComponentLabel] == probe.RoundKind.Component
	}))
	toDS := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: a.Namespace, Name: probe.RoundKind.Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-probe-agents").
		WithOptions(controllerOptions()).
		For(&appsv1.DaemonSet{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == a.Namespace && o.GetName() == probe.RoundKind.Name
		}))).
		Watches(&corev1.ConfigMap{}, toDS, plans).
		Complete(a)
}

// Reconcile writes the reports of the round the DaemonSet runs, once.
func (a *ProbeAgents) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, a.Play(ctx, a.client, a.reader)
}

// up is when the agent of plan p comes up: at its round's start, or as late
// as a test made it.
func (a *ProbeAgents) up(p round.Plan[probe.Params]) time.Time { return p.Start.Add(a.late[p.Node]) }

// windows is the window of each agent that came up in time to probe, from
// the time it came up.
func (a *ProbeAgents) windows(plans []round.Plan[probe.Params]) map[netip.Addr][3]time.Time {
	windows := map[netip.Addr][3]time.Time{}
	for _, p := range plans {
		up := a.up(p)
		if _, _, err := p.Window(up, probe.LeastWindow); err != nil {
			continue
		}
		from, sendUntil, end := probe.Window(probe.AgentConfig{Start: p.Start, End: p.End}, up)
		windows[p.Addr] = [3]time.Time{from, sendUntil, end}
	}
	return windows
}

// Play runs, once, the agents of the round the DaemonSet runs: winready's
// own probe.RunRound on each node, each agent coming up when a test made it
// late, over a simulated network on which a probe arrives when its sender
// and receiver overlap and no test blocked it. w writes the reports, unless
// WriteAs gave each node's writer, with which its agent then also reads its
// plan and key, as a real agent does with its pod's token. Tests without a
// manager call it directly.
func (a *ProbeAgents) Play(ctx context.Context, w client.Client, r client.Reader) error {
	ds := &appsv1.DaemonSet{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: probe.RoundKind.Name}, ds); err != nil {
		return client.IgnoreNotFound(err)
	}
	id := round.ID(ds.Spec.Template.Annotations[round.RoundAnnotation])
	plans, err := readPlans[probe.Params](ctx, r, a.Namespace, probe.RoundKind, id)
	if err != nil || !wholeRound(plans) {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.played[id] {
		return nil
	}
	heard := a.network(plans)
	reads := r
	if a.api != nil {
		reads = a.api
	}
	for _, p := range plans {
		if a.silent[p.Node] {
			continue
		}
		agent := round.Agent[probe.Params, probe.Result]{Client: agentClient{WithWatch: asWatcher(w), reader: reads}, Kind: probe.RoundKind,
			Namespace: a.Namespace, Node: p.Node, Clock: clocktesting.NewFakePassiveClock(a.up(p))}
		if a.writers != nil {
			agent.Client = asWatcher(a.writers(p.Node))
		}
		if err := probe.RunRound(ctx, agent, heard); err != nil {
			return fmt.Errorf("the probe agent of %s: %w", p.Node, err)
		}
	}
	a.played[id] = true
	return nil
}

// network is the simulated network of a round's agents: what each agent
// hears, from when every agent came up (probe.Window), the silent ones
// sending nothing, the blocked probes lost.
func (a *ProbeAgents) network(plans []round.Plan[probe.Params]) probe.Network {
	windows := a.windows(plans)
	received := map[netip.Addr][]netip.Addr{}
	for _, p := range plans {
		sender, ok := windows[p.Addr]
		if a.silent[p.Node] || !ok {
			continue // a node that never started sends nothing either
		}
		for _, peer := range p.Peers {
			receiver, ok := windows[peer]
			// A probe arrives while the sender sends and the receiver listens.
			heard := ok && sender[0].Before(sender[1]) && receiver[0].Before(sender[1]) && sender[0].Before(receiver[2])
			if heard && !a.blocked[[2]netip.Addr{p.Addr, peer}] {
				received[peer] = append(received[peer], p.Addr)
			}
		}
	}
	return func(cfg probe.AgentConfig) (probe.Prober, error) {
		res := probe.Result{Mode: probe.ModeCapture, ReceivedFrom: received[cfg.NodeIP]}
		for _, e := range cfg.Extra {
			if !a.blocked[[2]netip.Addr{cfg.NodeIP, e}] {
				res.EchoedBy = append(res.EchoedBy, e)
			}
		}
		return heardProber(res), nil
	}
}

// heardProber is an agent that heard, within its window, what the
// simulated network delivered to it.
type heardProber probe.Result

func (h heardProber) Run(_ context.Context, report func(probe.Result)) probe.Result {
	report(probe.Result(h))
	return probe.Result(h)
}

// agentClient is a simulated agent's client: it reads through reader and
// writes through its client.
type agentClient struct {
	client.WithWatch
	reader client.Reader
}

func (c agentClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

// wholeRound says whether plans hold every agent of their round: each peer
// a plan probes, and each sender it expects, has a plan of its own. A cache
// may hold some of a round's plans when its DaemonSet arrives; the agents
// and the check pods, played at once, wait for the rest, as each real one
// waits for its own.
func wholeRound[P any](plans []round.Plan[P]) bool {
	planned := map[netip.Addr]bool{}
	for _, p := range plans {
		planned[p.Addr] = true
	}
	for _, p := range plans {
		for _, addr := range append(slices.Clone(p.Peers), p.Expect...) {
			if !planned[addr] {
				return false
			}
		}
	}
	return len(plans) > 0
}

// readPlans reads the plans of round id of kind, as the simulator sees all
// of them at once (each real agent reads only its own).
func readPlans[P any](ctx context.Context, r client.Reader, namespace string, k round.Kind, id round.ID) ([]round.Plan[P], error) {
	list := &corev1.ConfigMapList{}
	err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{round.PlanLabel: string(id), round.ComponentLabel: k.Component})
	if err != nil {
		return nil, fmt.Errorf("reading the %s plans: %w", k.Component, err)
	}
	plans := make([]round.Plan[P], 0, len(list.Items))
	for i := range list.Items {
		p, err := round.DecodePlan[P](&list.Items[i])
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// asWatcher lets a plain client stand for an agent's, which only writes
// here: the simulator reads the plans itself.
func asWatcher(c client.Client) client.WithWatch {
	if w, ok := c.(client.WithWatch); ok {
		return w
	}
	return watchless{c}
}

type watchless struct{ client.Client }

func (watchless) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("the simulated agents do not watch")
}
