package calicosim

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/round"
)

// DataplaneFault is how a test breaks the simulated pod network.
type DataplaneFault string

// The faults a test may set.
const (
	// FaultNone: every check passes.
	FaultNone DataplaneFault = ""
	// FaultTCP drops TCP between nodes while ICMP passes, as broken VXLAN
	// checksum offload does; Service ClusterIPs fail with it.
	FaultTCP DataplaneFault = "TCPOnly"
	// FaultMTU drops packets above PathMTU between nodes: small TCP passes,
	// full-size TCP does not.
	FaultMTU DataplaneFault = "MTU"
)

// PodChecks plays winready's pod network check pods on the simulated nodes,
// as ProbeAgents plays the UDP probe's agents: winready's own check pod's
// round (podcheck.ReportServing, podcheck.Check) over a simulated dataplane.
// When the check DaemonSet appears, each Linux node's pod reports that it
// serves; once the plans are written, each checks its peers as the dataplane
// a test broke lets it, and reports.
type PodChecks struct {
	// Namespace is where rounds run.
	Namespace string
	// PodMTU is the MTU the simulated pods report; PathMTU the largest
	// packet FaultMTU lets through.
	PodMTU, PathMTU int

	client client.Client
	reader client.Reader

	mu     sync.Mutex
	fault  DataplaneFault
	broken map[[2]string]bool
	// onUpdated breaks pairs by which of their nodes run the current
	// calico-node template.
	onUpdated UpdatedFault
	silent    map[string]bool
	// reported is how far each round's pods have reported, by node.
	reported map[round.ID]map[string]round.ReportStage
}

// NewPodChecks returns simulated check pods for rounds in namespace.
func NewPodChecks(namespace string) *PodChecks {
	c := &PodChecks{Namespace: namespace, PodMTU: 1450, PathMTU: 1350}
	c.Reset()
	return c
}

// Break breaks the dataplane between every pair of nodes.
func (c *PodChecks) Break(f DataplaneFault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault = f
}

// BreakPair drops everything between nodes a and b, both ways, as a VXLAN
// path that UDP 4789 cannot cross.
func (c *PodChecks) BreakPair(a, b string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken[[2]string{a, b}], c.broken[[2]string{b, a}] = true, true
}

// UpdatedFault is a dataplane that breaks with the new calico-node: which
// pairs it drops, by the template their nodes' calico-node runs.
type UpdatedFault string

const (
	// UpdatedNone breaks nothing by template.
	UpdatedNone UpdatedFault = ""
	// UpdatedAny drops every pair with a node on the current template.
	UpdatedAny UpdatedFault = "Any"
	// UpdatedMixed drops only the pairs between a node on the current
	// template and one on an older one, as a VXLAN path the old and the new
	// calico-node do not agree on.
	UpdatedMixed UpdatedFault = "Mixed"
)

// BreakUpdated breaks the dataplane of the nodes whose calico-node pod runs
// the DaemonSet's current template (its pod-template-generation label is the
// DaemonSet's template generation), as f says.
func (c *PodChecks) BreakUpdated(f UpdatedFault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onUpdated = f
}

// updatedNodes are the nodes whose calico-node pod runs the current template.
func (c *PodChecks) updatedNodes(ctx context.Context, r client.Reader) (map[string]bool, error) {
	ds := &appsv1.DaemonSet{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: calicoNamespace, Name: nodeDaemonSet}, ds); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(calicoNamespace), client.MatchingLabels{appLabel: nodeDaemonSet}); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.Labels[templateGenerationLabel] == ds.Annotations[templateGenerationAnnotation] {
			out[p.Spec.NodeName] = true
		}
	}
	return out, nil
}

// Silence makes a node's pod never serve, as one that cannot start.
func (c *PodChecks) Silence(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.silent[node] = true
}

// Reset mends the dataplane.
func (c *PodChecks) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fault, c.broken, c.silent, c.onUpdated = FaultNone, map[[2]string]bool{}, map[string]bool{}, UpdatedNone
	c.reported = map[round.ID]map[string]round.ReportStage{}
}

// SetupWithManager registers the pods on mgr: the check DaemonSet and its
// plans wake them.
func (c *PodChecks) SetupWithManager(mgr ctrl.Manager) error {
	c.client, c.reader = mgr.GetClient(), newCachedReader(mgr)
	ds := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == c.Namespace && o.GetName() == podcheck.Name
	}))
	plans := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, plan := o.GetLabels()[round.PlanLabel]
		return o.GetNamespace() == c.Namespace && plan && o.GetLabels()[round.ComponentLabel] == podcheck.Component
	}))
	toDS := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: c.Namespace, Name: podcheck.Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-podchecks").
		WithOptions(controllerOptions()).
		For(&appsv1.DaemonSet{}, ds).
		Watches(&corev1.ConfigMap{}, toDS, plans).
		Complete(c)
}

// Reconcile plays one step of the round the DaemonSet runs.
func (c *PodChecks) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, c.Play(ctx, c.client, c.reader)
}

// Play runs winready's own check pods (podcheck.ReportServing and
// podcheck.Check) on the simulated nodes: each says it serves until the
// plans are written, then each checks through the dataplane a test broke,
// once. A pod's clock stands at the start of its round's window, so it
// checks at once. Tests without a manager call it directly.
func (c *PodChecks) Play(ctx context.Context, w client.Client, r client.Reader) error {
	ds := &appsv1.DaemonSet{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: podcheck.Name}, ds); err != nil {
		return client.IgnoreNotFound(err)
	}
	id := round.ID(ds.Spec.Template.Annotations[round.RoundAnnotation])
	plans, err := readPlans[podcheck.Params](ctx, r, c.Namespace, podcheck.RoundKind, id)
	if err != nil {
		return err
	}
	if len(plans) == 0 {
		return c.serve(ctx, w, r, id)
	}
	if !wholeRound(plans) {
		return nil // a peer's plan is not in the cache yet: it wakes the pods
	}
	nodeOf := map[netip.Addr]string{}
	for _, p := range plans {
		nodeOf[p.Addr] = p.Node
	}
	updated, err := c.updatedNodes(ctx, r)
	if err != nil {
		return err
	}
	for _, p := range plans {
		if c.stage(id, p.Node) == round.Done {
			continue
		}
		planned, err := round.PlanObject(podcheck.RoundKind, c.Namespace, p)
		if err != nil {
			return err
		}
		pod := c.pod(plannedClient{WithWatch: asWatcher(w), plan: planned}, p.Node)
		pod.Clock = clocktesting.NewFakePassiveClock(p.Start)
		dataplane := func(_ context.Context, cfg podcheck.Config) podcheck.Result {
			return c.results(p.Node, cfg.Peers, nodeOf, updated)
		}
		if err := podcheck.Check(ctx, pod, id, p.Addr, dataplane); err != nil {
			return fmt.Errorf("the check pod of %s: %w", p.Node, err)
		}
		c.reached(id, p.Node, round.Done)
	}
	return nil
}

// serve has every Linux node's pod say that it serves, each at an address
// of its own.
func (c *PodChecks) serve(ctx context.Context, w client.Client, r client.Reader, id round.ID) error {
	nodes, err := round.ListLinuxNodes(ctx, r)
	if err != nil {
		return err
	}
	slices.SortFunc(nodes, func(a, b round.Member) int { return strings.Compare(a.Node, b.Node) })
	for i, n := range nodes {
		if c.isSilent(n.Node) || c.stage(id, n.Node) != "" {
			continue
		}
		ip := netip.AddrFrom4([4]byte{10, 244 + byte(i>>16), byte(i >> 8), byte(i)})
		if err := podcheck.ReportServing(ctx, c.pod(asWatcher(w), n.Node), id, ip); err != nil {
			return fmt.Errorf("the check pod of %s: %w", n.Node, err)
		}
		c.reached(id, n.Node, round.Serving)
	}
	return nil
}

// pod is node's check pod as a round agent with client c.
func (c *PodChecks) pod(cl client.WithWatch, node string) round.Agent[podcheck.Params, podcheck.Result] {
	return round.Agent[podcheck.Params, podcheck.Result]{Client: cl, Kind: podcheck.RoundKind, Namespace: c.Namespace, Node: node}
}

func (c *PodChecks) isSilent(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.silent[node]
}

func (c *PodChecks) stage(id round.ID, node string) round.ReportStage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reported[id][node]
}

// reached remembers how far node's pod got in round id.
func (c *PodChecks) reached(id round.ID, node string, stage round.ReportStage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reported[id] == nil {
		c.reported[id] = map[string]round.ReportStage{}
	}
	c.reported[id][node] = stage
}

// plannedClient is a simulated check pod's client: its watch for its plan
// starts with the plan, as the API server's watch starts with the objects
// it matches; the simulator read the plans already.
type plannedClient struct {
	client.WithWatch
	plan *corev1.ConfigMap
}

func (c plannedClient) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	w := watch.NewRaceFreeFake()
	w.Add(c.plan.DeepCopy())
	return w, nil
}

// results are what node's pod sees of its peers through the dataplane.
func (c *PodChecks) results(node string, peers []netip.Addr, nodeOf map[netip.Addr]string, updated map[string]bool) podcheck.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := podcheck.Result{MTU: c.PodMTU, DNS: podcheck.Pass, Service: podcheck.Pass}
	if c.fault == FaultTCP {
		res.Service = podcheck.Fail
	}
	for _, peer := range peers {
		pr := podcheck.PeerResult{Peer: peer, ICMP: podcheck.Pass, TCPSmall: podcheck.Pass, TCPFull: podcheck.Pass}
		switch {
		case c.broken[[2]string{node, nodeOf[peer]}], c.brokenByTemplate(updated[node], updated[nodeOf[peer]]):
			pr.ICMP, pr.TCPSmall, pr.TCPFull = podcheck.Fail, podcheck.Fail, podcheck.Fail
		case c.fault == FaultTCP:
			pr.TCPSmall, pr.TCPFull = podcheck.Fail, podcheck.Fail
		case c.fault == FaultMTU:
			pr.TCPFull, pr.PathMTU = podcheck.Fail, c.PathMTU
		}
		res.Peers = append(res.Peers, pr)
	}
	return res
}

// brokenByTemplate says whether onUpdated drops a pair whose nodes run the
// current template (a, b). It is called with mu held.
func (c *PodChecks) brokenByTemplate(a, b bool) bool {
	switch c.onUpdated {
	case UpdatedAny:
		return a || b
	case UpdatedMixed:
		return a != b
	}
	return false
}
