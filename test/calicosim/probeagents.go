package calicosim

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/probe"
)

// ProbeAgents plays winready's UDP 4789 probe agents on simulated nodes:
// when the probe DaemonSet appears it reads the plan and writes each node's
// report through the API, as the real agents do, with the probes a test has
// blocked left out.
type ProbeAgents struct {
	// Namespace is the probe namespace, where rounds run.
	Namespace string

	client client.Client
	reader client.Reader

	mu      sync.Mutex
	blocked map[[2]netip.Addr]bool
	silent  map[string]bool
	// writers, when set, gives the client each node's agent writes its
	// report with, as real agents write with their pod's token.
	writers func(node string) client.Client
}

// NewProbeAgents returns simulated agents for rounds in namespace.
func NewProbeAgents(namespace string) *ProbeAgents {
	return &ProbeAgents{Namespace: namespace, blocked: map[[2]netip.Addr]bool{}, silent: map[string]bool{}}
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

// Reset clears blocked pairs, silenced nodes and per-node writers.
func (a *ProbeAgents) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.blocked, a.silent, a.writers = map[[2]netip.Addr]bool{}, map[string]bool{}, nil
}

// WriteAs makes each node's agent write its report with the client that
// writer returns for the node (such as one holding a token bound to a pod on
// that node) instead of the simulator's own.
func (a *ProbeAgents) WriteAs(writer func(node string) client.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.writers = writer
}

// SetupWithManager registers the agents on mgr.
func (a *ProbeAgents) SetupWithManager(mgr ctrl.Manager) error {
	a.client, a.reader = mgr.GetClient(), mgr.GetAPIReader()
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-probe-agents").
		WithOptions(controllerOptions()).
		For(&appsv1.DaemonSet{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == a.Namespace && o.GetName() == preflight.ProbeName
		}))).
		Complete(a)
}

// Reconcile writes the reports of the round the DaemonSet runs.
func (a *ProbeAgents) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ds := &appsv1.DaemonSet{}
	if err := a.reader.Get(ctx, req.NamespacedName, ds); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	plan := &corev1.ConfigMap{}
	if err := a.reader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: preflight.ProbeName}, plan); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	round := plan.Data[preflight.PlanRound]
	if ds.Spec.Template.Annotations[preflight.ReportLabel] != round {
		return ctrl.Result{}, nil // the plan of another round
	}
	nodes := map[string]preflight.NodePlan{}
	for key := range plan.Data {
		if key == preflight.PlanRound || key == preflight.PlanDuration || key == preflight.PlanExtra ||
			strings.HasPrefix(key, preflight.PlanMetaPrefix) {
			continue
		}
		np, err := preflight.DecodePlan(plan.Data, key)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("reading the probe plan: %w", err)
		}
		nodes[key] = np
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	received := map[netip.Addr][]netip.Addr{}
	for name, np := range nodes {
		if a.silent[name] {
			continue // a node that never started sends nothing either
		}
		for _, peer := range np.Peers {
			if !a.blocked[[2]netip.Addr{np.IP, peer}] {
				received[peer] = append(received[peer], np.IP)
			}
		}
	}
	for name, np := range nodes {
		if a.silent[name] {
			continue
		}
		var echoed []netip.Addr
		for _, e := range np.Extra {
			if !a.blocked[[2]netip.Addr{np.IP, e}] {
				echoed = append(echoed, e)
			}
		}
		report := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: preflight.ReportName(name),
				Labels: preflight.ReportLabels(round)},
			Data: preflight.EncodeReport(round, name, probe.ModeCapture, received[np.IP], echoed, ""),
		}
		c := a.client
		if a.writers != nil {
			c = a.writers(name)
		}
		if err := c.Create(ctx, report); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("writing the probe report of %s: %w", name, err)
		}
	}
	return ctrl.Result{}, nil
}
