package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/round"
)

// CanaryTrigger is the trigger of the canary's pod network check round.
const CanaryTrigger = "Canary"

// rolloutCanary is the rider of the canary (spec.rollout.canary): the
// write that starts a calico-node rollout slows it to one node at a time
// (join); once the canary's nodes run the new calico-node, the pod network
// check runs between them and the nodes still on the old one while the
// rollout goes on (rolling); when it passes the rollout goes on at
// spec.rollout.maxUnavailable, and when it fails the changes that started
// it are taken back (revert.go) and the migration stops (policy.go,
// canaryBlocked).
type rolloutCanary struct{}

func (rolloutCanary) join(s *scope, t *stepTurn) {
	if !rerendersNode(t) {
		return
	}
	if c := s.wr.Status.Canary; c != nil && c.State == v1alpha1.CanaryFailed && !c.Reverted {
		return // the write that takes the failed canary's changes back
	}
	if c := s.wr.Status.Canary; c != nil && c.Direction == t.in.Direction && c.State != v1alpha1.CanaryFailed &&
		slices.Contains(c.Steps, t.step.Name()) {
		// A later write of a step the canary's write included: the same
		// rollout, whose canary goes on (and keeps its pace until it passes).
		if c.State == v1alpha1.CanaryRolling || c.State == v1alpha1.CanaryChecking {
			t.batch.changes = slices.DeleteFunc(t.batch.changes, func(c calico.Change) bool { return c.Pointer == calico.PathNodeMaxUnavailable })
		}
		return
	}
	s.wr.Status.Canary = nil
	size := canarySize(s, t.in)
	if size == 0 {
		return
	}
	slower, ok := speed(s).Canary(t.in)
	if !ok {
		s.note(corev1.EventTypeNormal, conditions.ReasonCanarySkipped, string(t.step.Name()),
			"no canary for this rollout: calico-node's maxUnavailable in the Installation is %s; set spec.rollout.maxUnavailable "+
				"for the pace after the canary, or spec.rollout.canary: 0", maxUnavailableShown(t.in))
		return
	}
	// The canary's pace replaces the spec's in this write; the spec's
	// follows once the canary passes.
	t.batch.changes = slices.DeleteFunc(t.batch.changes, func(c calico.Change) bool { return c.Pointer == calico.PathNodeMaxUnavailable })
	t.batch.changes = append(t.batch.changes, slower...)
	s.wr.Status.Canary = &v1alpha1.CanaryStatus{
		Steps: append([]v1alpha1.StepName{t.step.Name()}, t.batch.steps...), Direction: t.in.Direction,
		State: v1alpha1.CanaryRolling, Size: int32(size), FromTemplateGeneration: templateGeneration(t.in.Cluster.Node),
		Slowed: len(slower) > 0,
	}
}

func (rolloutCanary) prepare(context.Context, walk, *scope, *stepTurn) error { return nil }

func (k rolloutCanary) rolling(ctx context.Context, w walk, s *scope, t *stepTurn) Outcome {
	return k.advance(ctx, w, s, t.step.Name(), t.in, false)
}

// prove finishes a canary whose check outlasted the rollout: the step is
// done once the check has passed.
func (k rolloutCanary) prove(ctx context.Context, w walk, s *scope, t *stepTurn) Outcome {
	return k.advance(ctx, w, s, t.step.Name(), t.in, true)
}

func (rolloutCanary) plan(s *scope, in phase.Input, plan []v1alpha1.PlannedChange) []v1alpha1.PlannedChange {
	size := canarySize(s, in)
	i := slices.IndexFunc(plan, func(c v1alpha1.PlannedChange) bool { return slices.Contains(rendersCalicoNode, c.Step) })
	if size == 0 || i < 0 {
		return plan
	}
	if in.Originals == nil || in.Originals.NodeMaxUnavailable == nil {
		in.Originals = &v1alpha1.Originals{}
		phase.RecordMaxUnavailable(in.Cluster, in.Originals)
	}
	slower, ok := speed(s).Canary(in)
	if !ok {
		return plan
	}
	if c := s.wr.Status.Canary; c == nil || c.State == v1alpha1.CanaryPlanned {
		s.wr.Status.Canary = &v1alpha1.CanaryStatus{Steps: []v1alpha1.StepName{plan[i].Step}, Direction: in.Direction,
			State: v1alpha1.CanaryPlanned, Size: int32(size)}
	}
	// The spec's pace, which the rollout speed planned at i, follows the
	// canary's instead.
	step := plan[i].Step
	if plan[i].Field == (&calico.Change{Pointer: calico.PathNodeMaxUnavailable}).Field() {
		plan = slices.Delete(plan, i, i+1)
	}
	var add []calico.Change
	add = append(add, slower...)
	slowed := in.Cluster
	if len(slower) > 0 {
		slowed = slowedCluster(in.Cluster)
	}
	add = append(add, speed(s).AfterCanary(phase.Input{Cluster: slowed})...)
	return slices.Insert(plan, i, phase.Plan(step, add)...)
}

// slowedCluster is c with calico-node's maxUnavailable at one node.
func slowedCluster(c *calico.Cluster) *calico.Cluster {
	inst := c.Installation.DeepCopy()
	one := intstr.FromInt32(1)
	inst.Spec.NodeUpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one}
	out := *c
	out.Installation = inst
	return &out
}

// rerendersNode says whether the turn's write re-renders calico-node.
func rerendersNode(t *stepTurn) bool {
	renders := func(n v1alpha1.StepName) bool { return slices.Contains(rendersCalicoNode, n) }
	return renders(t.step.Name()) || slices.ContainsFunc(t.batch.steps, renders)
}

// canarySize is how many nodes the canary waits for: spec.rollout.canary
// of the Linux nodes calico-node runs on, rounded up, and fewer than all of
// them; 0 when it is off, the pod network check is disabled, or calico-node
// runs on one node. Unset, it is 3 nodes on a cluster of more than twice
// that: on a smaller one the canary would be most of the rollout, and its
// check would add a round to a rollout of a minute or two.
func canarySize(s *scope, in phase.Input) int {
	if s.wr.Spec.PodNetworkCheck.Disabled || in.Cluster == nil || in.Cluster.Node == nil {
		return 0
	}
	nodes := int(in.Cluster.Node.Status.DesiredNumberScheduled)
	want := intstr.FromInt32(v1alpha1.DefaultCanaryNodes)
	if c := s.wr.Spec.Rollout.Canary; c != nil {
		want = *c
	} else if nodes <= 2*v1alpha1.DefaultCanaryNodes {
		return 0
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&want, nodes, true)
	if err != nil {
		return 0
	}
	return max(0, min(n, nodes-1))
}

// canaryOff says whether the spec turns the canary off: spec.rollout.canary
// 0 (or 0%), or the pod network check disabled.
func canaryOff(s *scope) bool {
	c := s.wr.Spec.Rollout.Canary
	return s.wr.Spec.PodNetworkCheck.Disabled || c != nil && (c.Type == intstr.Int && c.IntVal == 0 || c.Type == intstr.String && c.StrVal == "0%")
}

// templateGeneration is calico-node's template generation, 0 when unknown.
func templateGeneration(ds *appsv1.DaemonSet) int64 {
	if ds == nil {
		return 0
	}
	g, _ := strconv.ParseInt(ds.Annotations[templateGenerationAnnotation], 10, 64)
	return g
}

// maxUnavailableShown is the Installation's maxUnavailable as a person
// reads it.
func maxUnavailableShown(in phase.Input) string {
	ru := in.Cluster.Installation.Spec.NodeUpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		return "unset"
	}
	return ru.MaxUnavailable.String()
}

// advance moves the canary of the write step was part of on: it waits for
// the canary's nodes, checks them, and on the verdict raises the pace or
// stops for the revert.
//
// settled says the step has settled (prove): a step that re-renders
// calico-node settled with no new template means no rollout came of the
// write, and the canary goes.
func (k rolloutCanary) advance(ctx context.Context, w walk, s *scope, step v1alpha1.StepName, in phase.Input, settled bool) Outcome {
	// Any step of the write: the one that waits for calico-node's rollout
	// may come after the step whose turn made it (in a rollback, the
	// Windows dataplane's turn writes BGP back too).
	c := s.wr.Status.Canary
	if c == nil || !slices.Contains(c.Steps, step) || c.Direction != in.Direction {
		return done()
	}
	switch c.State {
	case v1alpha1.CanaryRolling, v1alpha1.CanaryChecking:
	case v1alpha1.CanaryFailed:
		return canaryFailed(s)
	default:
		return done()
	}
	if canaryOff(s) {
		// Turned off midway (spec.rollout.canary: 0, or the check disabled).
		return k.pass(ctx, w, s, in, "the canary was turned off")
	}
	if c.State == v1alpha1.CanaryRolling {
		if gen := templateGeneration(in.Cluster.Node); gen <= c.FromTemplateGeneration {
			// Not rendered yet (the step's own wait says so), or, once a
			// step that re-renders calico-node settled, never: no rollout.
			if settled && slices.Contains(rendersCalicoNode, step) && in.Cluster.Node != nil {
				s.wr.Status.Canary = nil
			}
			return done()
		}
		return k.await(ctx, w, s, in)
	}
	return k.step(w, s, in).collect(ctx, s, &s.wr.Status.Canary.Round.RoundState)
}

// await waits until the canary's nodes run the new calico-node, then starts
// the check around them.
func (k rolloutCanary) await(ctx context.Context, w walk, s *scope, in phase.Input) Outcome {
	c := s.wr.Status.Canary
	gen := templateGeneration(in.Cluster.Node)
	updated, err := updatedNodes(ctx, w.Client, gen)
	if err != nil {
		return failed(err)
	}
	if len(updated) < int(c.Size) {
		return waitingFor(fmt.Sprintf("the calico-node rollout, one node at a time until the canary's nodes run the new calico-node: %d of %d",
			len(updated), c.Size))
	}
	c.Nodes = updated[:c.Size]
	return k.step(w, s, in).start(ctx, s)
}

// engine is the pod network check's engine, its round paired around the
// canary's nodes.
func (rolloutCanary) engine(w walk, s *scope, id round.ID, token round.Token) (*podcheck.Engine, round.Spec[podcheck.Params]) {
	e, spec := podCheck{w.Reconciler, CanaryTrigger}.engine(s, id, token)
	nodes := s.wr.Status.Canary.Nodes
	spec.Pair = func(members []round.Member, seed string) []round.Assignment {
		return round.PairAround(members, nodes, seed)
	}
	return e, spec
}

// step is the canary's round step: the pod network check's round, paired
// around the canary's nodes and judged against the baseline. It passes the
// canary or fails it; when its plans are gone the canary's nodes are
// checked again.
func (k rolloutCanary) step(w walk, s *scope, in phase.Input) roundStep[podcheck.Params, podcheck.Result] {
	c := s.wr.Status.Canary
	return roundStep[podcheck.Params, podcheck.Result]{r: w.Reconciler, token: round.TokenOf(s.wr.Annotations[RerunPodCheckAnnotation]),
		what: "the canary's pod network check", starting: "the canary's pod network check", fix: podCheckRefusals,
		rerun:   rerunPodCheckCommand() + "; or set spec.rollout.canary: 0 for the rollout to go on without it",
		reports: "the canary's check reports are deleted",
		engine: func(id round.ID, token round.Token) (*podcheck.Engine, round.Spec[podcheck.Params]) {
			return k.engine(w, s, id, token)
		},
		started: func(rs v1alpha1.RoundState, spec round.Spec[podcheck.Params]) Outcome {
			c.State, c.Round = v1alpha1.CanaryChecking, &v1alpha1.PodCheckRound{RoundState: rs, Trigger: CanaryTrigger}
			s.note(corev1.EventTypeNormal, conditions.ReasonCanaryChecking, string(c.Steps[0]),
				"calico-node's new template runs on the canary's nodes (%s): checking the pod network between them and the nodes on the old one (round %s)",
				strings.Join(c.Nodes, ", "), spec.ID)
			return progressing(podCheckPoll, "the canary: checking the pod network between %s and the nodes on the old calico-node", strings.Join(c.Nodes, ", "))
		},
		advanced: checkAdvanced(s, c.Round, "the canary proved nothing", func() Outcome { return k.fail(s) }),
		waiting: func(p round.Progress) Outcome {
			return progressing(min(p.Wait, podCheckPoll), "the canary: %d of %d check pods on the canary's nodes and their peers reported",
				p.Reported, p.Expected)
		},
		restart: func() Outcome {
			// Check the canary's nodes again.
			c.State, c.Round = v1alpha1.CanaryRolling, nil
			return progressing(podCheckPoll, "the canary: its check's plans are gone, checking again")
		},
		judge: func(ctx context.Context, res round.Results[podcheck.Params, podcheck.Result]) func() Outcome {
			podcheck.Judge(c.Round, res, podCheckStatus(s).Baseline, rerunPodCheckCommand())
			return func() Outcome {
				if c.Round.Worse {
					return k.fail(s)
				}
				return k.pass(ctx, w, s, in, "the pod network check passed between the canary's nodes and the others: "+c.Round.Diagnosis)
			}
		},
		refused: func(msg string) Outcome { return stop(ReasonPodNetworkCheckFailed, "%s", msg) },
	}
}

// pass ends the canary: the rollout goes on at spec.rollout.maxUnavailable.
func (rolloutCanary) pass(ctx context.Context, w walk, s *scope, in phase.Input, why string) Outcome {
	c := s.wr.Status.Canary
	if changes := speed(s).AfterCanary(in); len(changes) > 0 {
		if err := calico.Apply(ctx, w.Client, in.Cluster, changes); err != nil {
			return failed(fmt.Errorf("raising calico-node's maxUnavailable after the canary: %w", err))
		}
	}
	c.State = v1alpha1.CanaryPassed
	s.note(corev1.EventTypeNormal, conditions.ReasonCanaryPassed, string(c.Steps[0]), "%s",
		bounded(why+"; calico-node rolls out on the other nodes at "+paceAfterCanary(s, in)))
	return done()
}

// paceAfterCanary names the pace the rollout goes on at.
func paceAfterCanary(s *scope, in phase.Input) string {
	if w := s.wr.Spec.Rollout.MaxUnavailable; w != nil {
		return "maxUnavailable " + w.String() + " (spec.rollout.maxUnavailable)"
	}
	return "the Installation's pace (" + maxUnavailableShown(in) + ")"
}

// fail marks the canary failed: a migration's changes are taken back next
// (revertWorse), a rollback's stop where they are.
func (rolloutCanary) fail(s *scope) Outcome {
	c := s.wr.Status.Canary
	c.State = v1alpha1.CanaryFailed
	s.note(corev1.EventTypeWarning, conditions.ReasonCanaryFailed, string(c.Steps[0]), "%s",
		bounded(fmt.Sprintf("the pod network check failed between the canary's nodes (%s) and the others: %s",
			strings.Join(c.Nodes, ", "), c.Round.Diagnosis)))
	return canaryFailed(s)
}

// updatedNodes are the nodes, sorted, whose calico-node pod runs template
// generation gen and is Ready, read from the cache.
func updatedNodes(ctx context.Context, c client.Reader, gen int64) ([]string, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(calico.SystemNamespace),
		client.MatchingLabels{CalicoNodePodLabel: CalicoNodePodLabelValue, templateGenerationLabel: strconv.FormatInt(gen, 10)}); err != nil {
		return nil, fmt.Errorf("listing calico-node's pods: %w", err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && podReady(&p) {
			out = append(out, p.Spec.NodeName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// canaryRevertDue names the steps whose changes a failed canary of a
// migration takes back, in the order a rollback takes them: a revert not
// made yet.
func canaryRevertDue(s *scope) ([]v1alpha1.StepName, bool) {
	c := s.wr.Status.Canary
	if c == nil || c.State != v1alpha1.CanaryFailed || c.Reverted || c.Direction != v1alpha1.DirectionMigrate {
		return nil, false
	}
	steps := slices.Clone(c.Steps)
	slices.Reverse(steps)
	return steps, true
}

// canaryFailed is the stop of a failed canary: reverting, or reverted, or a
// rollback's, which stays where it is.
func canaryFailed(s *scope) Outcome {
	c := s.wr.Status.Canary
	diag := "no round"
	if c.Round != nil {
		diag = c.Round.Diagnosis
	}
	nodes := strings.Join(c.Nodes, ", ")
	switch {
	case c.Direction == v1alpha1.DirectionRollback:
		return stop(conditions.ReasonCanaryFailed, "the rollback's canary failed: the pod network check between the canary's nodes (%s) and the others: %s. "+
			"calico-node keeps rolling one node at a time: set spec.direction: Migrate to go back, or fix the pod network and %s",
			nodes, diag, rerunPodCheckCommand())
	case !c.Reverted:
		return stop(conditions.ReasonRevertingStep, "reverting steps %s: the canary's check failed between its nodes (%s) and the others: %s",
			stepList(c.Steps), nodes, diag).lookAgain(podCheckPoll)
	}
	return stop(conditions.ReasonCanaryFailed, "the canary failed, so steps %s were reverted and calico-node rolled back on the canary's nodes (%s): %s. "+
		"Fix the pod network, then %s; or set spec.direction: Rollback", stepList(c.Steps), nodes, diag, rerunPodCheckCommand())
}

func stepList(steps []v1alpha1.StepName) string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// canaryBlocked says why step may not be changed again: a canary of its
// write failed and no new check was asked for.
func canaryBlocked(s *scope, step v1alpha1.StepName) Outcome {
	c := s.wr.Status.Canary
	if c == nil || c.State != v1alpha1.CanaryFailed || !c.Reverted || !slices.Contains(c.Steps, step) ||
		(c.Round != nil && !podCheckRerunSeen(s, c.Round)) {
		return done()
	}
	return canaryFailed(s)
}
