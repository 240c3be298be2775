package controllers

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/phase"
)

// reconcile walks the steps in order toward w.dir: each takes its turn
// (walkStep, the stages below) until one is not done in this pass; a step
// whose turn ends done is finished in status.steps.
func (w walk) reconcile(ctx context.Context, s *scope) Outcome {
	in := input(s, w.dir)
	s.cluster = in.Cluster
	total := len(w.steps)
	for i, step := range w.steps {
		n := i + 1
		if w.dir == v1alpha1.DirectionRollback {
			n = total - i
		}
		logger := log.FromContext(ctx).WithValues("step", step.Name(), "index", n, "direction", w.dir)
		if o := w.walkStep(log.IntoContext(ctx, logger), s, in, step, w.steps[i+1:]); !o.Done() {
			return atStep(o, step.Name(), n, total)
		}
		s.steps().finish(step.Name(), w.dir)
	}
	return done()
}

// atStep places a step's outcome in the walk: its message names the step and
// where it stands, and a wait for Calico counts against that step's deadline.
func atStep(o Outcome, step v1alpha1.StepName, n, total int) Outcome {
	if o.Err != nil || o.Step == step {
		return o
	}
	o.Step = step
	o.Message = fmt.Sprintf("step %d/%d (%s): %s", n, total, step, o.Message)
	return o
}

// stage is one point of a step's turn; an outcome that is not done ends the
// turn there.
type stage func(w walk, ctx context.Context, s *scope, t *stepTurn) Outcome

// stages are a step's turn, in order: the lifecycle every step goes through
// in each pass, toward either direction. The riders (riders.go) join it at
// gather, prepare and prove.
var stages = []stage{
	walk.observe, // read the step's objects and list its changes
	walk.recheck, // a step Calico applied before: its value alone, or a revert
	walk.permit,  // may the due changes be made now (policy, the Windows nodes, the step's gate)
	walk.gather,  // the later steps batched with it, and the riders' changes
	walk.prepare, // the riders before the write (the hold of calico-node)
	walk.write,   // the write, and the step read again
	walk.settle,  // Calico applied it (the riders while it rolls out: the canary)
	walk.overlay, // an overlay keeps what the step wrote
	walk.prove,   // the riders once it has settled (the pod network check)
}

// walkStep takes one step as far as it goes in this pass.
func (w walk) walkStep(ctx context.Context, s *scope, in phase.Input, step phase.Step, rest []phase.Step) Outcome {
	t := &stepTurn{step: step, in: in, rest: rest}
	for _, st := range stages {
		if o := st(w, ctx, s, t); !o.Done() || t.ended {
			return o
		}
	}
	return done()
}

func (w walk) observe(ctx context.Context, _ *scope, t *stepTurn) Outcome {
	if err := t.step.Read(ctx, w.readers(), t.in.Cluster); err != nil {
		return failed(fmt.Errorf("observing step %s: %w", t.step.Name(), err))
	}
	t.changes = t.step.Diff(t.in)
	t.due = calico.Due(t.changes)
	return done()
}

// recheck: Calico applied this step before (or, in a rollback, the
// migration never got to it); later steps' changes make its TigeraStatus
// and rollouts move again, which is not this step's to wait for. Only the
// value itself is checked, and a value someone put back is a revert.
func (w walk) recheck(ctx context.Context, s *scope, t *stepTurn) Outcome {
	name, dir := t.step.Name(), t.in.Direction
	rec := s.steps().entry(name)
	untouched := dir == v1alpha1.DirectionRollback && rec.State == v1alpha1.StepPending
	if !untouched && !s.steps().finished(name, dir) {
		return done()
	}
	if len(t.changes) == 0 {
		t.ended = true
		return w.overlaid(ctx, t.step, t.in)
	}
	if s.steps().finished(name, dir) && rec.Changed && rec.Target == targetDigest(s.wr.Status.Targets, name, dir) {
		// A spec edit that moved the target is not a revert.
		return w.reverted(ctx, s, name, t.changes)
	}
	return done()
}

// permit says whether the due changes may be made now.
func (w walk) permit(ctx context.Context, s *scope, t *stepTurn) Outcome {
	if len(t.due) == 0 {
		return done()
	}
	name := t.step.Name()
	if o := w.mayChangeNow(ctx, s, name, t.in.Direction); !o.Done() {
		return o
	}
	if g, ok := t.step.(phase.Gated); ok {
		if err := g.ReadGate(ctx, w.readers(), t.in.Cluster); err != nil {
			return failed(fmt.Errorf("observing step %s: %w", name, err))
		}
		if ready, why := g.ReadyToChange(t.in); !ready {
			s.steps().start(name, t.in.Direction)
			return waitingFor(why)
		}
	}
	return done()
}

// gather makes the write: the due changes, the later steps batched with
// them, and what each rider joins.
func (w walk) gather(ctx context.Context, s *scope, t *stepTurn) Outcome {
	if len(t.due) == 0 {
		return done()
	}
	b, err := w.batchFor(ctx, s, t.in, t.step, t.rest, t.due)
	if err != nil {
		return failed(err)
	}
	t.batch = b
	for _, r := range riders {
		r.join(s, t)
	}
	return done()
}

func (w walk) prepare(ctx context.Context, s *scope, t *stepTurn) Outcome {
	if len(t.due) == 0 {
		return done()
	}
	for _, r := range riders {
		if err := r.prepare(ctx, w, s, t); err != nil {
			return failed(fmt.Errorf("step %s: %w", t.step.Name(), err))
		}
	}
	return done()
}

func (w walk) write(ctx context.Context, s *scope, t *stepTurn) Outcome {
	if len(t.due) == 0 {
		return done()
	}
	return w.writeBatch(ctx, s, t.in, t.step, t.batch)
}

func (w walk) settle(ctx context.Context, s *scope, t *stepTurn) Outcome {
	if ok, why := t.step.Settled(t.in); !ok {
		s.steps().start(t.step.Name(), t.in.Direction)
		for _, r := range riders {
			if r, ok := r.(rollingRider); ok {
				if o := r.rolling(ctx, w, s, t); !o.Done() {
					return o
				}
			}
		}
		return waitingFor(why)
	}
	return done()
}

func (w walk) overlay(ctx context.Context, _ *scope, t *stepTurn) Outcome {
	return w.overlaid(ctx, t.step, t.in)
}

// prove asks each rider whether the settled step is proven.
func (w walk) prove(ctx context.Context, s *scope, t *stepTurn) Outcome {
	for _, r := range riders {
		if o := r.prove(ctx, w, s, t); !o.Done() {
			return o
		}
	}
	return done()
}

// mayChangeNow asks allowed about the step the walk is about to change, and
// keeps what that means while Calico is Degraded for CalicoHealthy. A
// rollback looks at the Windows nodes once more, past the cache, right
// before its write: a node that joins midway stops it between two steps.
func (w walk) mayChangeNow(ctx context.Context, s *scope, name v1alpha1.StepName, dir v1alpha1.Direction) Outcome {
	if _, msg := calicoVerdict(s, name, dir); msg != "" {
		s.calico.verdict = msg
	}
	if o := w.allowed(s, name); !o.Done() {
		return o
	}
	if dir != v1alpha1.DirectionRollback {
		return done()
	}
	nodes, err := windowsNodes(ctx, w.APIReader)
	if err != nil {
		return failed(err)
	}
	s.windowsNodes = nodes
	return windowsNodesJoined(s, dir)
}

// writeBatch makes the changes that are due and reads the step again; it returns
// an outcome when the step cannot go on in this pass.
func (w walk) writeBatch(ctx context.Context, s *scope, in phase.Input, step phase.Step, b batched) Outcome {
	name := step.Name()
	s.steps().start(name, in.Direction)
	log.FromContext(ctx).Info("changing the cluster", "changes", len(b.changes), "with", b.steps)
	if err := calico.Apply(ctx, w.Client, in.Cluster, b.changes); err != nil {
		return failed(fmt.Errorf("step %s: %w", name, err))
	}
	s.steps().markChanged(name)
	for _, other := range b.steps {
		s.steps().markChanged(other)
	}
	if err := step.Read(ctx, w.readers(), in.Cluster); err != nil {
		return failed(fmt.Errorf("observing step %s: %w", name, err))
	}
	if len(calico.Due(step.Diff(in))) > 0 {
		// The cache has not seen the write yet, or someone changed the
		// object in between: the watch event of either wakes the next pass
		// (the workqueue keeps an event that comes during this one), so no
		// timer is set on top of it.
		return waitingFor("the change to show")
	}
	return done()
}

// batchFor adds to a step's due changes those of the later batchable steps, so
// that the Tigera operator renders them in one reconcile and calico-node
// rolls out once: the write goes under a hold of calico-node when it spans
// the Installation and the services-endpoint ConfigMap (hold.go). A later
// step whose change may not be made now (approval, a gate, Calico unhealthy)
// is left to its own turn with every step after it, as is every step under
// spec.rollout.conservative.
func (w walk) batchFor(ctx context.Context, s *scope, in phase.Input, step phase.Step, rest []phase.Step, due []calico.Change) (batched, error) {
	b := batched{changes: due}
	if slices.Contains(batchable, step.Name()) && !s.wr.Spec.Rollout.Conservative {
		for _, other := range rest {
			if !slices.Contains(batchable, other.Name()) {
				continue
			}
			// A step not read is not left out: the write waits for the
			// next pass rather than split the batch.
			if err := other.Read(ctx, w.readers(), in.Cluster); err != nil {
				return batched{}, fmt.Errorf("observing step %s: %w", other.Name(), err)
			}
			more := calico.Due(other.Diff(in))
			if len(more) == 0 {
				continue
			}
			// A step that must wait holds back every later one too: the
			// steps' order is what the operator's validation relies on.
			if !w.allowed(s, other.Name()).Done() {
				break
			}
			if g, ok := other.(phase.Gated); ok {
				if err := g.ReadGate(ctx, w.readers(), in.Cluster); err != nil {
					return batched{}, fmt.Errorf("observing step %s: %w", other.Name(), err)
				}
				if ready, _ := g.ReadyToChange(in); !ready {
					break
				}
			}
			s.steps().start(other.Name(), in.Direction)
			b.changes = append(b.changes, more...)
			b.steps = append(b.steps, other.Name())
		}
	}
	return b, nil
}
