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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/preflight"
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
// as ProbeAgents plays the UDP probe's: when the check DaemonSet appears,
// each Linux node's pod reports that it serves; once the plan is written,
// each reports its checks through the API, as the dataplane a test broke
// would make them.
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
	silent map[string]bool
}

// NewPodChecks returns simulated check pods for rounds in namespace.
func NewPodChecks(namespace string) *PodChecks {
	return &PodChecks{Namespace: namespace, PodMTU: 1450, PathMTU: 1350, broken: map[[2]string]bool{}, silent: map[string]bool{}}
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
	c.fault, c.broken, c.silent = FaultNone, map[[2]string]bool{}, map[string]bool{}
}

// SetupWithManager registers the pods on mgr: the check DaemonSet and its
// plan wake them.
func (c *PodChecks) SetupWithManager(mgr ctrl.Manager) error {
	c.client, c.reader = mgr.GetClient(), mgr.GetAPIReader()
	mine := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == c.Namespace && o.GetName() == podcheck.Name
	}))
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-podchecks").
		WithOptions(controllerOptions()).
		For(&appsv1.DaemonSet{}, mine).
		Watches(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}, mine).
		Complete(c)
}

// Reconcile plays one step of the round the DaemonSet runs.
func (c *PodChecks) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, c.Play(ctx, c.client, c.reader)
}

// Play writes what the pods of the running round would: serving reports
// until the plan is there, then their checks. Tests without a manager call
// it directly.
func (c *PodChecks) Play(ctx context.Context, w client.Client, r client.Reader) error {
	ds := &appsv1.DaemonSet{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: podcheck.Name}, ds); err != nil {
		return client.IgnoreNotFound(err)
	}
	round := ds.Spec.Template.Annotations[preflight.ReportLabel]
	plan := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: podcheck.Name}, plan)
	if apierrors.IsNotFound(err) || err == nil && plan.Data[preflight.PlanRound] != round {
		return c.serve(ctx, w, r, round)
	}
	if err != nil {
		return err
	}
	pods, peers, err := podcheck.ReadPlan(ctx, r, c.Namespace, round)
	if err != nil {
		return err
	}
	nodeOf := map[netip.Addr]string{}
	for _, p := range pods {
		nodeOf[p.IP] = p.Name
	}
	for _, p := range pods {
		res := c.results(p.Name, peers[p.Name], nodeOf)
		if err := writeReport(ctx, w, podcheck.Report(c.Namespace, round, p.Name, podcheck.EncodeDone(round, p.Name, p.IP, res, ""))); err != nil {
			return err
		}
	}
	return nil
}

// serve writes a serving report for every Linux node's pod, each with an
// address of its own.
func (c *PodChecks) serve(ctx context.Context, w client.Client, r client.Reader, round string) error {
	nodes, err := preflight.ListLinuxNodes(ctx, r)
	if err != nil {
		return err
	}
	slices.SortFunc(nodes, func(a, b preflight.ProbeNode) int { return strings.Compare(a.Name, b.Name) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range nodes {
		if c.silent[n.Name] {
			continue
		}
		ip := netip.AddrFrom4([4]byte{10, 244 + byte(i>>16), byte(i >> 8), byte(i)})
		report := podcheck.Report(c.Namespace, round, n.Name, podcheck.EncodeServing(round, n.Name, ip, c.PodMTU))
		if err := w.Create(ctx, report); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("writing the serving report of %s: %w", n.Name, err)
		}
	}
	return nil
}

// results are what node's pod sees of its peers through the dataplane.
func (c *PodChecks) results(node string, peers []netip.Addr, nodeOf map[netip.Addr]string) podcheck.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := podcheck.Result{MTU: c.PodMTU, DNS: podcheck.Pass, Service: podcheck.Pass}
	if c.fault == FaultTCP {
		res.Service = podcheck.Fail
	}
	for _, peer := range peers {
		pr := podcheck.PeerResult{Peer: peer, ICMP: podcheck.Pass, TCPSmall: podcheck.Pass, TCPFull: podcheck.Pass}
		switch {
		case c.broken[[2]string{node, nodeOf[peer]}]:
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

// writeReport replaces a pod's serving report with its checks, as the pod
// does.
func writeReport(ctx context.Context, w client.Client, cm *corev1.ConfigMap) error {
	err := w.Update(ctx, cm)
	if apierrors.IsNotFound(err) {
		err = w.Create(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("writing the pod network check report %s: %w", cm.Name, err)
	}
	return nil
}
