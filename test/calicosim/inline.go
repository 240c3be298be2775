package calicosim

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Inline runs the simulator without a manager: the same controllers as NewManager's, reconciled one after the
// other in the caller's goroutine, on a fake clock. A test steps the simulated Calico with Settle between two
// reconciles of the code under test, so that what it asserts follows from the order of the calls, never from
// the timing of watches and workqueues.
//
// Inline has no watches: each Step reconciles every controller, for every object it would be woken for. It
// cannot play InterruptRender (the interrupted reconcile would block the caller); those tests run the
// simulator in a manager.
type Inline struct {
	Sim    *Simulator
	Agents *ProbeAgents
	Clock  *clocktesting.FakeClock

	// writes counts the simulated controllers' writes that changed an object.
	writes atomic.Int64
	steps  []inlineController
}

// inlineController is one of the simulator's controllers with the requests its watches would enqueue.
type inlineController struct {
	name     string
	r        reconcile.Reconciler
	requests func(context.Context) []reconcile.Request
}

// NewInline returns the simulated Tigera operator, DaemonSet controller, Felix, Windows nodes, probe agents,
// pod network check pods and quota controller of probeNamespace, reading and writing through c (straight to
// the API server: there is no cache), paced by clock.
func NewInline(c client.WithWatch, clock *clocktesting.FakeClock, opts Options, probeNamespace string) *Inline {
	in := &Inline{Clock: clock}
	// c, counting the writes: a Step that wrote woke something.
	cl := interceptor.NewClient(c, in.countWrites())
	opts.Clock = clock
	sim := New(opts)
	sim.client, sim.reader = cl, cl
	sim.podChecks = NewPodChecks(probeNamespace)
	sim.podChecks.client, sim.podChecks.reader = cl, cl
	agents := NewProbeAgents(probeNamespace)
	agents.client, agents.reader = cl, cl
	quotas := NewResourceQuotas(probeNamespace)
	quotas.client, quotas.reader = cl, cl
	in.Sim, in.Agents = sim, agents

	rollouts := &rolloutController{sim: sim, client: cl, lastStep: map[types.UID]rolloutClock{}}
	windowsNodes := &windowsNodeAgent{sim: sim, client: cl}
	one := func(name string) func(context.Context) []reconcile.Request {
		return func(context.Context) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
		}
	}
	in.steps = []inlineController{
		{"installation", &coreController{sim: sim, status: newStatusManager(StatusCalico)}, one(installationName)},
		{"ippool", &poolController{sim: sim, status: newStatusManager(StatusIPPools), apiserver: newStatusManager(StatusAPIServer)}, one(installationName)},
		{"windows", &windowsController{sim: sim, status: newStatusManager(StatusCalicoWindows)}, one(installationName)},
		{"daemonset", rollouts, func(ctx context.Context) []reconcile.Request { return rollouts.allDaemonSets(ctx, nil) }},
		{"windows-nodes", windowsNodes, func(ctx context.Context) []reconcile.Request { return windowsNodes.allWindowsNodes(ctx, nil) }},
		{"felix", &felix{sim: sim}, one("felix")},
		{"probe-agents", agents, one(probeNamespace)},
		{"podchecks", sim.podChecks, one(probeNamespace)},
		{"resourcequotas", quotas, one(probeNamespace)},
	}
	return in
}

// countWrites counts the writes of the simulated controllers that changed an object: a patch or update that
// changes nothing leaves the resource version as it was, and wakes no watch.
func (in *Inline) countWrites() interceptor.Funcs {
	changed := func(obj client.Object, write func() error) error {
		rv := obj.GetResourceVersion()
		err := write()
		if err == nil && (rv == "" || obj.GetResourceVersion() != rv) {
			in.writes.Add(1)
		}
		return err
	}
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return changed(obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return changed(obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return changed(obj, func() error { return c.Patch(ctx, obj, p, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			in.writes.Add(1)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return changed(obj, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			return changed(obj, func() error { return c.SubResource(sub).Patch(ctx, obj, p, opts...) })
		},
	}
}

// Step reconciles every controller once for each object it watches. It names the controllers that wrote, and
// says the soonest time one asked to be reconciled again (zero when none did).
func (in *Inline) Step(ctx context.Context) (wrote []string, next time.Duration, err error) {
	for _, c := range in.steps {
		before := in.writes.Load()
		for _, req := range c.requests(ctx) {
			res, err := c.r.Reconcile(ctx, req)
			if err != nil {
				return nil, 0, fmt.Errorf("simulated %s, %s: %w", c.name, req.Name, err)
			}
			if after := res.RequeueAfter; after > 0 && (next == 0 || after < next) {
				next = after
			}
		}
		if in.writes.Load() != before {
			wrote = append(wrote, c.name)
		}
	}
	return wrote, next, nil
}

// maxInlineSteps bounds Settle: a simulated Calico that is still writing after this many steps is looping.
const maxInlineSteps = 1000

// maxIdleSteps ends Settle when the clock has moved this many times in a row and no controller wrote: what the
// simulator waits for then does not come with time (a rollout held by HoldRollouts).
const maxIdleSteps = 20

// Settle steps the simulator until nothing is left for it to do: no controller wrote in the last step and none
// waits. While one waits (a rollout's next node, the status lag), the clock moves to the soonest wait. The
// code under test sees the same clock move.
func (in *Inline) Settle(ctx context.Context) error {
	var wrote []string
	idle := 0
	for range maxInlineSteps {
		var next time.Duration
		var err error
		wrote, next, err = in.Step(ctx)
		switch {
		case err != nil:
			return err
		case len(wrote) > 0:
			idle = 0
		case next == 0 || idle == maxIdleSteps:
			return nil
		default:
			idle++
			in.Clock.Step(next)
		}
	}
	return fmt.Errorf("the simulated Calico still changes the cluster after %d steps (the last by %v)", maxInlineSteps, wrote)
}
