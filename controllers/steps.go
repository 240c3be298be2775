package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/phase"
	"github.com/winready/winready/internal/rollout"
)

// mayChange says why the next change of a step may not be made now; nil
// when it may.
type mayChange func(ctx context.Context, step v1alpha1.StepName) *phase.Outcome

// walk runs the steps in order toward in.Direction. Each step reads the
// cluster and lists its changes; a step with changes due makes them unless
// allowed says why not. It returns where it stopped, or Finished when every
// step has settled.
func (p *pass) walk(ctx context.Context, in phase.Input, steps []phase.Step, allowed mayChange) phase.Outcome {
	p.cluster = in.Cluster
	total := len(steps)
	for i, step := range steps {
		n := i + 1
		if in.Direction == v1alpha1.DirectionRollback {
			n = total - i
		}
		logger := log.FromContext(ctx).WithValues("step", step.Name(), "index", n, "direction", in.Direction)
		if o := p.walkStep(log.IntoContext(ctx, logger), in, step, steps[i+1:], allowed); o.Kind != phase.Done {
			return o.At(step.Name(), n, total)
		}
		p.finishStep(step.Name(), in.Direction)
	}
	if o := p.restoreSpeed(ctx, in); o != nil {
		return *o
	}
	return phase.Finished()
}

// walkStep takes one step as far as it goes in this reconcile.
func (p *pass) walkStep(ctx context.Context, in phase.Input, step phase.Step, rest []phase.Step, allowed mayChange) phase.Outcome {
	name, dir := step.Name(), in.Direction
	if err := step.Read(ctx, p.readers(), in.Cluster); err != nil {
		return phase.FailedWith(fmt.Errorf("observing step %s: %w", name, err))
	}
	changes := step.Diff(in)
	rec := p.step(name)
	if untouched := dir == v1alpha1.DirectionRollback && rec.State == v1alpha1.StepPending; untouched || p.finished(name, dir) {
		// Calico applied this step before (or, in a rollback, the migration
		// never got to it); later steps' changes make its TigeraStatus and
		// rollouts move again, which is not this step's to wait for. Only
		// the value itself is checked.
		if len(changes) == 0 {
			return p.overlaid(ctx, step, in)
		}
		if p.finished(name, dir) && rec.Changed && rec.Target == p.targetDigest(name, dir) {
			// Someone put back the value this step had changed; a spec edit
			// that moved the target is not a revert.
			if o := p.reverted(ctx, name, changes); o != nil {
				return *o
			}
		}
	}
	if due := calico.Due(changes); len(due) > 0 {
		if o := allowed(ctx, name); o != nil {
			return *o
		}
		if g, ok := step.(phase.Gated); ok {
			if ready, why := g.ReadyToChange(in); !ready {
				p.startStep(name, dir)
				return phase.WaitingFor(why)
			}
		}
		b, err := p.batch(ctx, in, step, rest, allowed, due)
		if err != nil {
			return phase.FailedWith(err)
		}
		if err := p.holdCalicoNode(ctx, in, &b); err != nil {
			return phase.FailedWith(fmt.Errorf("step %s: %w", name, err))
		}
		if o := p.change(ctx, in, step, b); o != nil {
			return *o
		}
	}
	if ok, why := step.Settled(in); !ok {
		p.startStep(name, dir)
		return phase.WaitingFor(why)
	}
	if o := p.overlaid(ctx, step, in); o.Kind != phase.Done {
		return o
	}
	return p.verify(ctx, name, dir)
}

// verify proves the pod network after a disruptive step of the migration
// has settled; the step is done once the check passed.
func (p *pass) verify(ctx context.Context, name v1alpha1.StepName, dir v1alpha1.Direction) phase.Outcome {
	if _, ok := disruptive[name]; !ok || dir != v1alpha1.DirectionMigrate {
		return phase.Finished()
	}
	done, res, err := p.checkPodNetwork(ctx, name)
	switch {
	case err != nil:
		return phase.FailedWith(err)
	case !done:
		return phase.Outcome{Kind: phase.Waiting, Reported: true, After: res.RequeueAfter}
	}
	return phase.Finished()
}

// change makes the changes that are due and reads the step again; it returns
// an outcome when the step cannot go on in this reconcile.
func (p *pass) change(ctx context.Context, in phase.Input, step phase.Step, b batched) *phase.Outcome {
	name := step.Name()
	p.startStep(name, in.Direction)
	log.FromContext(ctx).Info("changing the cluster", "changes", len(b.changes), "with", b.steps)
	if err := calico.Apply(ctx, p.r.Client, in.Cluster, b.changes); err != nil {
		o := phase.FailedWith(fmt.Errorf("step %s: %w", name, err))
		return &o
	}
	p.markChanged(name)
	for _, other := range b.steps {
		p.markChanged(other)
	}
	if err := step.Read(ctx, p.readers(), in.Cluster); err != nil {
		o := phase.FailedWith(fmt.Errorf("observing step %s: %w", name, err))
		return &o
	}
	if len(calico.Due(step.Diff(in))) > 0 {
		// The cache has not seen the write yet, or someone changed the
		// object in between: look again soon.
		o := phase.WaitingFor("the change to show")
		o.Unseen = true
		return &o
	}
	return nil
}

// rendersCalicoNode are the steps whose changes make the Tigera operator
// re-render calico-node, each a rollout over every node.
var rendersCalicoNode = []v1alpha1.StepName{v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint}

// batchable are the steps whose changes the Tigera operator applies in one
// reconcile with at most one calico-node rollout between them (README, the
// step table): BGP and the services endpoint re-render calico-node; the
// service network and the Windows dataplane change no part of calico-node's
// template (pkg/render/node.go reads neither; pkg/render/windows.go renders
// them into calico-node-windows, which runs on Windows nodes only, and none
// joins before the cluster is Ready). The operator's validation wants the
// service network with the Windows dataplane, and the first IPv4 pool VXLAN,
// which the Encapsulation step before them has settled.
var batchable = []v1alpha1.StepName{v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint,
	v1alpha1.StepServiceCIDRs, v1alpha1.StepWindowsDataplane}

// batched are the changes one write makes, and the later steps they include.
type batched struct {
	changes []calico.Change
	steps   []v1alpha1.StepName
}

// batch adds to a step's due changes those of the later batchable steps, so
// that the Tigera operator renders them in one reconcile and calico-node
// rolls out once: the write goes under a hold of calico-node when it spans
// the Installation and the services-endpoint ConfigMap (hold.go). A later
// step whose change may not be made now (approval, a gate, Calico unhealthy)
// is left to its own turn with every step after it, as is every step under
// spec.rollout.conservative. The change that speeds the rollout up rides
// along when the write re-renders calico-node.
func (p *pass) batch(ctx context.Context, in phase.Input, step phase.Step, rest []phase.Step, allowed mayChange, due []calico.Change) (batched, error) {
	b := batched{changes: due}
	if slices.Contains(batchable, step.Name()) && !p.wr.Spec.Rollout.Conservative {
		for _, other := range rest {
			if !slices.Contains(batchable, other.Name()) {
				continue
			}
			// A step not read is not left out: the write waits for the
			// next pass rather than split the batch.
			if err := other.Read(ctx, p.readers(), in.Cluster); err != nil {
				return batched{}, fmt.Errorf("observing step %s: %w", other.Name(), err)
			}
			more := calico.Due(other.Diff(in))
			if len(more) == 0 {
				continue
			}
			// A step that must wait holds back every later one too: the
			// steps' order is what the operator's validation relies on.
			if o := allowed(ctx, other.Name()); o != nil {
				if o.Kind == phase.Failed {
					return batched{}, o.Err
				}
				break
			}
			if g, ok := other.(phase.Gated); ok {
				if ready, _ := g.ReadyToChange(in); !ready {
					break
				}
			}
			p.startStep(other.Name(), in.Direction)
			b.changes = append(b.changes, more...)
			b.steps = append(b.steps, other.Name())
		}
	}
	renders := func(n v1alpha1.StepName) bool { return slices.Contains(rendersCalicoNode, n) }
	if renders(step.Name()) || slices.ContainsFunc(b.steps, renders) {
		b.changes = append(b.changes, p.faster(in)...)
	}
	return b, nil
}

func (p *pass) readers() phase.Readers {
	return phase.Readers{Cache: p.r.Client, API: p.r.APIReader}
}

// conclude turns where a walk stopped into conditions, Events and when to
// look again. It is the one place that decides between waiting, holding and
// stalling, by the conditions catalogue.
func (p *pass) conclude(ctx context.Context, o phase.Outcome) (ctrl.Result, error) {
	switch o.Kind {
	case phase.Failed:
		return ctrl.Result{}, o.Err
	case phase.Waiting:
		if o.Reported {
			return ctrl.Result{RequeueAfter: o.After}, nil
		}
		msg := fmt.Sprintf("step %d/%d (%s): waiting for %s", o.Index, o.Total, o.Step, o.Message)
		result := p.wait(ctx, o.Step, msg)
		switch {
		case o.Unseen:
			result = ctrl.Result{RequeueAfter: p.r.guardRetry()}
		case o.After > 0 && result.RequeueAfter > o.After:
			result.RequeueAfter = o.After
		}
		return result, nil
	case phase.Blocked:
		p.blockedAt(o)
	}
	return ctrl.Result{}, nil
}

// wait reports a step waiting for Calico and stalls it once what it waits
// for has not moved for longer than the progress deadline, as a Deployment's
// progressDeadlineSeconds does: a slow rollout that keeps moving never
// stalls. Progress is any change of what the step waits for (a node updated,
// a pod available, a TigeraStatus catching up). The returned result wakes the
// reconciler when the deadline falls due; events from watched objects wake it
// sooner.
func (p *pass) wait(ctx context.Context, name v1alpha1.StepName, msg string) ctrl.Result {
	step := p.step(name)
	now := p.r.Clock.Now()
	if step.Message != msg || step.LastProgressAt == nil {
		at := metav1.NewTime(now)
		step.LastProgressAt = &at
	}
	step.Message = msg
	if pace := p.followRollout(now); pace != "" {
		msg += "; " + pace
	}
	// After the progress bookkeeping: the operator rewording its Degraded
	// message is not progress of the step.
	if says := p.operatorSays(msg); says != "" {
		msg += "; " + says
	}
	deadline := p.stepDeadline()
	idle := now.Sub(step.LastProgressAt.Time)
	if idle >= deadline {
		p.stall(conditions.ReasonStepTimeout, fmt.Sprintf("%s: no progress for %s, longer than the progress deadline %s "+
			"(spec.progressDeadline). Check TigeraStatus and the calico-system pods; the step resumes by itself when Calico "+
			"moves again, or raise spec.progressDeadline, or set spec.direction: Rollback", msg, idle.Round(time.Second), deadline))
		if !p.alreadyStalled(conditions.ReasonStepTimeout) {
			p.event(corev1.EventTypeWarning, conditions.ReasonStepTimeout, string(name), "%s", msg)
		}
		return ctrl.Result{}
	}
	p.progress(conditions.ReasonWaiting, msg)
	log.FromContext(ctx).V(1).Info("waiting", "step", name, "for", msg)
	return ctrl.Result{RequeueAfter: deadline - idle}
}

// followRollout keeps status.rollout on calico-node's rollout while one runs,
// and says how far it is and how long it has left.
func (p *pass) followRollout(now time.Time) string {
	if p.cluster == nil || p.cluster.Node == nil {
		return ""
	}
	s, _ := rollout.FromStatus(p.wr.Status.Rollout).Step(rollout.Observe(p.cluster.Node, now))
	p.wr.Status.Rollout = s.ToStatus()
	metrics.RecordRollout(p.wr.Status.Rollout)
	if s.Last.Done() {
		return ""
	}
	return "calico-node " + s.Message()
}

func (p *pass) alreadyStalled(reason string) bool {
	for _, c := range p.before.Status.Conditions {
		if c.Type == conditions.Stalled && c.Status == metav1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

// blockedAt reports a step that needs to change the cluster but may not.
func (p *pass) blockedAt(o phase.Outcome) {
	msg := fmt.Sprintf("step %d/%d (%s): %s", o.Index, o.Total, o.Step, o.Message)
	switch conditions.EffectOf(o.Reason) {
	case conditions.Holds:
		p.hold(o.Reason, msg)
	case conditions.Waits:
		// Calico recovering by itself resumes the migration: not a stall.
		p.progress(o.Reason, msg)
	default:
		p.stall(o.Reason, msg)
	}
}

// hold records that the spec asked winready to wait before the next change.
func (p *pass) hold(reason, msg string) {
	p.set(conditions.Stalled, metav1.ConditionFalse, reason, "")
	p.set(conditions.Reconciling, metav1.ConditionTrue, reason, msg)
	p.set(conditions.Ready, metav1.ConditionFalse, reason, msg)
	p.wr.Status.Message = msg
}

// step returns the status record of a step, adding it when missing.
func (p *pass) step(name v1alpha1.StepName) *v1alpha1.StepStatus {
	for i := range p.wr.Status.Steps {
		if p.wr.Status.Steps[i].Name == name {
			return &p.wr.Status.Steps[i]
		}
	}
	p.wr.Status.Steps = append(p.wr.Status.Steps, v1alpha1.StepStatus{Name: name, State: v1alpha1.StepPending})
	return &p.wr.Status.Steps[len(p.wr.Status.Steps)-1]
}

// resetSteps lists every step as pending, in order.
func (p *pass) resetSteps(steps []phase.Step) {
	p.wr.Status.Steps = nil
	for _, s := range steps {
		p.step(s.Name())
	}
}

// stepState is the state a step is in while busy, or once done, in direction dir.
func stepState(dir v1alpha1.Direction, done bool) v1alpha1.StepState {
	switch {
	case dir == v1alpha1.DirectionRollback && done:
		return v1alpha1.StepReverted
	case dir == v1alpha1.DirectionRollback:
		return v1alpha1.StepReverting
	case done:
		return v1alpha1.StepCompleted
	}
	return v1alpha1.StepInProgress
}

func (p *pass) startStep(name v1alpha1.StepName, dir v1alpha1.Direction) {
	step := p.step(name)
	state := stepState(dir, false)
	if step.State == state {
		return
	}
	now := metav1.NewTime(p.r.Clock.Now())
	step.State, step.StartedAt, step.FinishedAt, step.Changed = state, &now, nil, false
	p.event(corev1.EventTypeNormal, "StepStarted", string(name), "%s %s", stateVerb(dir), name)
}

// finished reports whether the status records the step as done in direction dir.
func (p *pass) finished(name v1alpha1.StepName, dir v1alpha1.Direction) bool {
	return p.step(name).State == stepState(dir, true)
}

func (p *pass) markChanged(name v1alpha1.StepName) { p.step(name).Changed = true }

func (p *pass) finishStep(name v1alpha1.StepName, dir v1alpha1.Direction) {
	step := p.step(name)
	state := stepState(dir, true)
	if step.State == state {
		return
	}
	now := metav1.NewTime(p.r.Clock.Now())
	if step.StartedAt == nil {
		step.StartedAt = &now
	}
	step.State, step.FinishedAt = state, &now
	step.Target = p.targetDigest(name, dir)
	step.Message = "already in place"
	if step.Changed {
		step.Message = "changed and applied by Calico"
		metrics.ObserveStep(name, dir, step.FinishedAt.Sub(step.StartedAt.Time))
	}
	p.event(corev1.EventTypeNormal, "StepFinished", string(name), "%s %s: %s", stateVerb(dir), name, step.Message)
}

func stateVerb(dir v1alpha1.Direction) string {
	if dir == v1alpha1.DirectionRollback {
		return "reverting"
	}
	return "migrating"
}

// calicoBlocked returns why no change may be made while Calico is unhealthy:
// a Degraded TigeraStatus means a change now could make things worse. When
// the Degraded state began after winready's own last change, the way out is
// through winready: a rollback, or a re-run of that step toward a corrected
// target, goes ahead (and says so). It decides on the health read once per
// pass by observeCalicoHealth.
func (p *pass) calicoBlocked(step v1alpha1.StepName, dir v1alpha1.Direction) *phase.Outcome {
	h := p.degraded
	if h == nil {
		p.set(conditions.CalicoHealthy, metav1.ConditionTrue, conditions.ReasonCalicoHealthy, "no TigeraStatus is Degraded")
		return nil
	}
	msg := fmt.Sprintf("TigeraStatus %s is Degraded (%s); no change is made until it recovers", h.Name, h.Message)
	if last := p.lastChange(); last != nil && !h.DegradedSince.IsZero() && !h.DegradedSince.Before(last.StartedAt.Time) {
		switch {
		case dir == v1alpha1.DirectionRollback:
			p.set(conditions.CalicoHealthy, metav1.ConditionFalse, conditions.ReasonCalicoDegraded, fmt.Sprintf(
				"TigeraStatus %s is Degraded (%s) since winready changed step %s: the rollback goes on to undo it", h.Name, h.Message, last.Name))
			return nil
		case step == last.Name || p.sameWrite(step, last):
			p.set(conditions.CalicoHealthy, metav1.ConditionFalse, conditions.ReasonCalicoDegraded, fmt.Sprintf(
				"TigeraStatus %s is Degraded (%s) since winready changed step %s: re-running it toward the corrected target", h.Name, h.Message, last.Name))
			return nil
		}
		msg = fmt.Sprintf("TigeraStatus %s is Degraded (%s) since winready changed step %s; set spec.direction: Rollback to undo it, "+
			"or correct the spec so that step %s runs again", h.Name, h.Message, last.Name, last.Name)
	}
	p.set(conditions.CalicoHealthy, metav1.ConditionFalse, conditions.ReasonCalicoDegraded, msg)
	if p.degradedTooLong(*h) {
		o := phase.BlockedBy(conditions.ReasonStepTimeout, msg+fmt.Sprintf("; Degraded for longer than the step deadline %s", p.stepDeadline()))
		return &o
	}
	o := phase.BlockedBy(conditions.ReasonCalicoDegraded, msg)
	return &o
}

// sameWrite says whether step was changed in the same write as last: a
// batch starts every step it includes at one moment.
func (p *pass) sameWrite(step v1alpha1.StepName, last *v1alpha1.StepStatus) bool {
	st := p.step(step)
	return st.Changed && st.StartedAt != nil && st.StartedAt.Equal(last.StartedAt) &&
		slices.Contains(batchable, step) && slices.Contains(batchable, last.Name)
}

// lastChange is the step winready changed most recently, nil when none.
func (p *pass) lastChange() *v1alpha1.StepStatus {
	var last *v1alpha1.StepStatus
	for i := range p.wr.Status.Steps {
		st := &p.wr.Status.Steps[i]
		if st.Changed && st.StartedAt != nil && (last == nil || !st.StartedAt.Before(last.StartedAt)) {
			last = st
		}
	}
	return last
}

// stepDeadline is how long a step may wait, and Calico may stay Degraded,
// before a person is asked.
func (p *pass) stepDeadline() time.Duration {
	return p.wr.Spec.EffectiveProgressDeadline()
}

// degradedTooLong reports whether Calico has been Degraded for longer than
// the step deadline.
func (p *pass) degradedTooLong(h calico.Health) bool {
	return !h.DegradedSince.IsZero() && p.r.Clock.Since(h.DegradedSince) >= p.stepDeadline()
}

// targetDigest names the target a step applies toward dir, for the steps
// whose target comes from the spec; "" for the others.
func (p *pass) targetDigest(name v1alpha1.StepName, dir v1alpha1.Direction) string {
	t := p.wr.Status.Targets
	if dir == v1alpha1.DirectionRollback || t == nil {
		return ""
	}
	var target string
	switch name {
	case v1alpha1.StepServicesEndpoint:
		target = t.APIServerHost + ":" + t.APIServerPort
	case v1alpha1.StepServiceCIDRs:
		target = strings.Join(t.ServiceCIDRs, ",")
	default:
		return ""
	}
	sum := sha256.Sum256([]byte(target))
	return hex.EncodeToString(sum[:8])
}

// observeCalicoHealth reads TigeraStatus calico and ippools once per pass:
// it keeps CalicoHealthy current, waits included, and remembers the first
// Degraded one for calicoBlocked, which refines the message when it decides
// on a change. Every Degraded one, calico-windows included once Windows is
// on, is kept for the message of a wait (operatorSays).
func (p *pass) observeCalicoHealth(ctx context.Context, inst *operatorv1.Installation) error {
	p.degraded, p.operatorDegraded = nil, nil
	overlay, err := calico.GetOverlay(ctx, p.r.Client)
	if err != nil {
		return err
	}
	// An overlay written after the preflight wins over what the steps write:
	// a wait then names it, since the operator reports nothing Degraded.
	p.overlay, p.overlayConflicts = overlay, calico.OverlayConflicts(overlay)
	for _, name := range []string{calico.StatusCalico, calico.StatusIPPools} {
		h, err := calico.ReadHealth(ctx, p.r.Client, name)
		if err != nil {
			return err
		}
		if h.Degraded {
			p.operatorDegraded = append(p.operatorDegraded, h)
		}
	}
	// calico-windows keeps its last status when Windows is turned off: only
	// while the Installation asks for HNS does it speak for the cluster.
	if calico.Deref(calico.WindowsDataplane(inst)) == string(operatorv1.WindowsDataplaneHNS) {
		h, err := calico.ReadHealth(ctx, p.r.Client, calico.StatusCalicoWindows)
		if err != nil {
			return err
		}
		if h.Degraded {
			p.operatorDegraded = append(p.operatorDegraded, h)
		}
	}
	for i := range p.operatorDegraded {
		h := p.operatorDegraded[i]
		if h.Name == calico.StatusCalicoWindows {
			break
		}
		p.degraded = &h
		if c := meta.FindStatusCondition(p.wr.Status.Conditions, conditions.CalicoHealthy); c == nil || c.Status != metav1.ConditionFalse {
			p.set(conditions.CalicoHealthy, metav1.ConditionFalse, conditions.ReasonCalicoDegraded,
				fmt.Sprintf("TigeraStatus %s is Degraded (%s)", h.Name, h.Message))
		}
		return nil
	}
	p.set(conditions.CalicoHealthy, metav1.ConditionTrue, conditions.ReasonCalicoHealthy, "no TigeraStatus is Degraded")
	return nil
}

// operatorSays is the Tigera operator's own reason for a wait: the Degraded
// message of TigeraStatus calico, ippools and (once Windows is on)
// calico-windows, each one not already in msg, and the overlay's fields that
// win over Installation default; "" when there is none.
func (p *pass) operatorSays(msg string) string {
	var parts []string
	for _, f := range p.overlayConflicts {
		parts = append(parts, fmt.Sprintf("Installation overlay sets spec.%s: %s, which wins over Installation default; remove it from the overlay", f.Path, f.Value))
	}
	if p.cluster != nil {
		if pace := p.speed().OverlayPace(phase.Input{Cluster: p.cluster}); pace != "" {
			parts = append(parts, pace)
		}
	}
	for _, h := range p.operatorDegraded {
		if h.Message != "" && strings.Contains(msg, h.Message) {
			continue
		}
		parts = append(parts, fmt.Sprintf("the Tigera operator reports TigeraStatus %s Degraded: %s", h.Name, h.Message))
	}
	return strings.Join(parts, "; ")
}
