package round

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

// ReportSlack is how long before a round's deadline the agents' window
// ends, so that their reports are in by the deadline.
const ReportSlack = 5 * time.Second

// Keys of a round's Secret: its random key, and the round.
const (
	SecretKey      = "key"
	SecretRoundKey = "round"
)

// planWriters bounds the plans written at a time.
const planWriters = 16

// Engine runs the rounds of one kind in a namespace.
type Engine[P, R any] struct {
	Kind Kind
	// Client writes, and reads the reports (the manager's cache holds them).
	Client client.Client
	// Reader reads past the cache: the nodes, and the plans once.
	Reader    client.Reader
	Namespace string
	// Image is the agents' image: the operator's own.
	Image string
	// Removed, when set, remembers across passes that this process removed
	// the kind's objects last: a start then has nothing to remove first.
	// Nil: every start removes what an earlier round may have left.
	Removed *Removed
}

// Removed remembers, between the passes of one process, the kinds of round
// whose objects it removed, all of them, and has created none of since. A
// round's end removes them once its verdict is saved, so that the start of
// the next round of the kind would find nothing to remove: with Removed, it
// sends no request for it. A new process (a restart, a new leader)
// remembers nothing, and its first start of each kind removes what an
// earlier one may have left. The zero value remembers nothing.
type Removed struct {
	mu    sync.Mutex
	kinds map[string]bool
}

// key names a kind of round in a namespace.
func (e *Engine[P, R]) key() string { return e.Namespace + "/" + e.Kind.Component }

// has says whether the kind's objects are known to be gone.
func (r *Removed) has(key string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kinds[key]
}

// set notes that the kind's objects are gone (true), or may not be: a
// start is about to create them (false).
func (r *Removed) set(key string, gone bool) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds == nil {
		r.kinds = map[string]bool{}
	}
	r.kinds[key] = gone
}

// Spec is what a round runs with.
type Spec[P any] struct {
	ID    ID
	Token Token
	// Seed orders the pairs; empty is the round's ID.
	Seed string
	// Timeout bounds the round from its start. Agents of a kind that plans
	// on serving have its first half to serve; every agent's window ends
	// ReportSlack before it.
	Timeout time.Duration
	// Params, when set, reads what every agent gets, when the plans are
	// written.
	Params func(context.Context) (P, error)
	// Owner owns the round's objects: they go with it.
	Owner []metav1.OwnerReference
	// Pair, when set, chooses the peers instead of Pair with the seed.
	Pair func(members []Member, seed string) []Assignment
}

// TimeoutFor is the timeout of a round whose agents work for window from
// its start.
func TimeoutFor(window time.Duration) time.Duration { return window + ReportSlack }

// Deadline is when the round in st ends, whatever has been reported.
func (s Spec[P]) Deadline(st *v1alpha1.RoundState) time.Time { return st.StartedAt.Add(s.Timeout) }

// pairBy is when a kind that plans on serving pairs the agents that serve.
func (s Spec[P]) pairBy(st *v1alpha1.RoundState) time.Time { return st.StartedAt.Add(s.Timeout / 2) }

// Start starts a round: it removes what an earlier one left (unless
// Removed knows it is gone), makes the round's key and objects, writes the
// plans for a kind that plans at the start, and starts the agents last, so
// that they find all of it. st is set only when all of it was written.
func (e *Engine[P, R]) Start(ctx context.Context, now time.Time, spec Spec[P], st *v1alpha1.RoundState) error {
	nodes, err := ListLinuxNodes(ctx, e.Reader)
	if err != nil {
		return err
	}
	if !e.Removed.has(e.key()) {
		if err := e.Cleanup(ctx); err != nil {
			return err
		}
	}
	// From here the kind's objects may exist, whatever comes of the start.
	e.Removed.set(e.key(), false)
	started := metav1.NewTime(now)
	next := v1alpha1.RoundState{Round: string(spec.ID), RerunToken: string(spec.Token), StartedAt: &started, Nodes: int32(len(nodes))}
	var objs []client.Object
	if e.Kind.Secret {
		secret, err := e.secret(spec.ID, spec.Owner)
		if err != nil {
			return err
		}
		objs = append(objs, secret)
	}
	if e.Kind.Objects != nil {
		objs = append(objs, e.Kind.Objects(e.Namespace, spec.Owner)...)
	}
	for _, obj := range objs {
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("starting the %s round: creating %s %s: %w", e.Kind.Component, kindOf(obj), obj.GetName(), err)
		}
	}
	if !e.Kind.PlanOnServe {
		if err := e.plan(ctx, now, spec, &next, nodes); err != nil {
			return err
		}
	}
	if err := e.Client.Create(ctx, DaemonSet(e.Kind, e.Namespace, e.Image, spec.ID, spec.Owner)); err != nil {
		return fmt.Errorf("starting the %s agents: %w", e.Kind.Component, err)
	}
	*st = next
	return nil
}

// DaemonSet runs one agent of kind on every Linux node, tolerating every
// taint, for round.
func DaemonSet(k Kind, namespace, image string, round ID, owner []metav1.OwnerReference) *appsv1.DaemonSet {
	pod := k.Pod(namespace, image)
	pod.NodeSelector = map[string]string{linuxLabel: "linux"}
	pod.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: k.Name, Labels: k.Labels(), OwnerReferences: owner},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: k.Labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: k.Labels(), Annotations: map[string]string{RoundAnnotation: string(round)}},
				Spec:       pod,
			},
		},
	}
}

// secret is a round's Secret: a random key of 32 bytes.
func (e *Engine[P, R]) secret(round ID, owner []metav1.OwnerReference) (*corev1.Secret, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("making the round's key: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Kind.Name, Labels: e.Kind.Labels(), OwnerReferences: owner},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{SecretRoundKey: []byte(round), SecretKey: key},
	}, nil
}

// plan pairs the members and writes each one's plan, a few at a time.
func (e *Engine[P, R]) plan(ctx context.Context, now time.Time, spec Spec[P], st *v1alpha1.RoundState, members []Member) error {
	var params P
	if spec.Params != nil {
		var err error
		if params, err = spec.Params(ctx); err != nil {
			return err
		}
	}
	seed := spec.Seed
	if seed == "" {
		seed = string(spec.ID)
	}
	end := spec.Deadline(st).Add(-ReportSlack)
	pair := spec.Pair
	if pair == nil {
		pair = Pair
	}
	assignments := pair(members, seed)
	work := make(chan Assignment)
	errs := make(chan error, len(assignments))
	var wg sync.WaitGroup
	for range min(planWriters, len(assignments)) {
		wg.Go(func() {
			for a := range work {
				p := Plan[P]{Round: spec.ID, Node: a.Node, Addr: a.Addr, Start: now, End: end, Peers: a.Peers, Expect: a.Expect, Params: params}
				errs <- e.writePlan(ctx, p)
			}
		})
	}
	for _, a := range assignments {
		work <- a
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	planned := metav1.NewTime(now)
	st.PlannedAt, st.Paired = &planned, int32(len(assignments))
	return nil
}

// writePlan creates a plan.
func (e *Engine[P, R]) writePlan(ctx context.Context, p Plan[P]) error {
	cm, err := PlanObject(e.Kind, e.Namespace, p)
	if err != nil {
		return err
	}
	if err := e.Client.Create(ctx, cm); err != nil {
		return fmt.Errorf("writing the %s plan of %s: %w", e.Kind.Component, p.Node, err)
	}
	return nil
}

// Progress is where a round stands after Advance.
type Progress struct {
	Stage Stage
	// Reported agents of Expected: serving ones while pairing, those done
	// while collecting.
	Reported, Expected int
	// Wait is how long until the round's next deadline.
	Wait time.Duration
	// Unpaired, set when the agents were paired in this call, are the Linux
	// nodes whose agent did not serve in time, sorted.
	Unpaired []string
	// NoneServed is true when no agent served in time: the round ends
	// having proved nothing, and has no plan to read.
	NoneServed bool
}

// Advance moves a started round on. For a kind that plans on serving it
// pairs the agents that serve once all of them do or half the round's time
// is up. Then it counts the reports: Complete once every planned agent
// reported or the round's time is up; Results reads them.
func (e *Engine[P, R]) Advance(ctx context.Context, now time.Time, spec Spec[P], st *v1alpha1.RoundState) (Progress, error) {
	reports, err := e.reports(ctx, ID(st.Round))
	if err != nil {
		return Progress{}, err
	}
	if StageOf(st) == Pairing {
		var members []Member
		for _, r := range reports {
			if r.Addr.IsValid() {
				members = append(members, Member{Node: r.Node, Addr: r.Addr})
			}
		}
		if by := spec.pairBy(st); len(members) < int(st.Nodes) && now.Before(by) {
			return Progress{Stage: Pairing, Reported: len(members), Expected: int(st.Nodes), Wait: by.Sub(now)}, nil
		}
		unpaired, err := e.unpaired(ctx, members)
		if err != nil {
			return Progress{}, err
		}
		if len(members) == 0 {
			return Progress{Stage: Complete, Expected: int(st.Nodes), Unpaired: unpaired, NoneServed: true}, nil
		}
		// Plans an earlier try wrote before it failed may pair other agents.
		if err := e.deleteAll(ctx, PlanLabel); err != nil {
			return Progress{}, err
		}
		if err := e.plan(ctx, now, spec, st, members); err != nil {
			return Progress{}, err
		}
		return Progress{Stage: Collecting, Expected: int(st.Paired), Wait: spec.Deadline(st).Sub(now), Unpaired: unpaired}, nil
	}
	done := 0
	for _, r := range reports {
		if r.Stage == Done {
			done++
		}
	}
	if deadline := spec.Deadline(st); done < int(st.Paired) && now.Before(deadline) {
		return Progress{Stage: Collecting, Reported: done, Expected: int(st.Paired), Wait: deadline.Sub(now)}, nil
	}
	return Progress{Stage: Complete, Reported: done, Expected: int(st.Paired)}, nil
}

// unpaired are the Linux nodes not among members, sorted.
func (e *Engine[P, R]) unpaired(ctx context.Context, members []Member) ([]string, error) {
	nodes, err := ListLinuxNodes(ctx, e.Reader)
	if err != nil {
		return nil, err
	}
	paired := make(map[string]bool, len(members))
	for _, m := range members {
		paired[m.Node] = true
	}
	var out []string
	for _, n := range nodes {
		if !paired[n.Node] {
			out = append(out, n.Node)
		}
	}
	slices.Sort(out)
	return out, nil
}

// reports reads the stage and the address of each report of round, from
// the cache, without decoding results.
func (e *Engine[P, R]) reports(ctx context.Context, round ID) ([]Report[struct{}], error) {
	list, err := e.reportObjects(ctx, round)
	if err != nil {
		return nil, err
	}
	out := make([]Report[struct{}], 0, len(list.Items))
	for _, cm := range list.Items {
		d := cm.Data
		r := Report[struct{}]{Round: round, Node: d[NodeKey], Stage: ReportStage(d[StageKey])}
		r.Addr, _ = netip.ParseAddr(d[AddrKey])
		out = append(out, r)
	}
	return out, nil
}

func (e *Engine[P, R]) reportObjects(ctx context.Context, round ID) (*corev1.ConfigMapList, error) {
	list := &corev1.ConfigMapList{}
	err := e.Client.List(ctx, list, client.InNamespace(e.Namespace),
		client.MatchingLabels{ReportLabel: string(round), ComponentLabel: e.Kind.Component})
	if err != nil {
		return nil, fmt.Errorf("listing the %s reports: %w", e.Kind.Component, err)
	}
	return list, nil
}

// Results are a round's plans and reports, read once it is complete.
type Results[P, R any] struct {
	// Plans are what each agent was given, sorted by node: the judging
	// counts against them, not against the nodes of now, so that a node that
	// joins or leaves during the round makes no false failure.
	Plans []Plan[P]
	// Reports are the reports of the agents that did their work, by node.
	Reports map[string]Report[R]
	// Failed says, by node, why an agent could not work.
	Failed map[string]string
}

// Results reads a round's plans (past the cache, a page at a time) and its
// reports. ok is false when the plans are gone: removed by hand, or by
// another round.
func (e *Engine[P, R]) Results(ctx context.Context, st *v1alpha1.RoundState) (res Results[P, R], ok bool, err error) {
	opts := []client.ListOption{client.InNamespace(e.Namespace), client.Limit(500),
		client.MatchingLabels{PlanLabel: st.Round, ComponentLabel: e.Kind.Component}}
	for cont := ""; ; {
		list := &corev1.ConfigMapList{}
		if err := e.Reader.List(ctx, list, append(opts, client.Continue(cont))...); err != nil {
			return res, false, fmt.Errorf("reading the %s plans: %w", e.Kind.Component, err)
		}
		for i := range list.Items {
			p, err := DecodePlan[P](&list.Items[i])
			if err != nil {
				return res, false, err
			}
			res.Plans = append(res.Plans, p)
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	if len(res.Plans) == 0 {
		return res, false, nil
	}
	slices.SortFunc(res.Plans, func(a, b Plan[P]) int { return cmp.Compare(a.Node, b.Node) })
	list, err := e.reportObjects(ctx, ID(st.Round))
	if err != nil {
		return res, false, err
	}
	res.Reports, res.Failed = map[string]Report[R]{}, map[string]string{}
	for i := range list.Items {
		r := DecodeReport[R](&list.Items[i])
		switch {
		case r.Stage != Done:
		case r.Error != "":
			res.Failed[r.Node] = r.Error
		default:
			res.Reports[r.Node] = r
		}
	}
	return res, true, nil
}

// Stop removes a round that is under way, when it is no longer wanted
// (skipped, disabled, paused, a dry run, a rollback). It says whether there
// was one.
func (e *Engine[P, R]) Stop(ctx context.Context, st *v1alpha1.RoundState) (bool, error) {
	if s := StageOf(st); s != Pairing && s != Collecting {
		return false, nil
	}
	return true, e.Cleanup(ctx)
}

// Cleanup removes the kind's agents, objects, key, plans and reports, and
// nothing of another kind's.
func (e *Engine[P, R]) Cleanup(ctx context.Context) error {
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	meta := metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Kind.Name}
	objs := []client.Object{&appsv1.DaemonSet{ObjectMeta: meta}}
	if e.Kind.Secret {
		objs = append(objs, &corev1.Secret{ObjectMeta: meta})
	}
	if e.Kind.Objects != nil {
		objs = append(objs, e.Kind.Objects(e.Namespace, nil)...)
	}
	for _, obj := range objs {
		if err := e.Client.Delete(ctx, obj, bg); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the %s round's %s: %w", e.Kind.Component, kindOf(obj), err)
		}
	}
	if err := e.deleteAll(ctx, ReportLabel); err != nil {
		return err
	}
	if err := e.deleteAll(ctx, PlanLabel); err != nil {
		return err
	}
	e.Removed.set(e.key(), true)
	return nil
}

// deleteAll removes the kind's ConfigMaps that carry label (reports or
// plans) in one request.
func (e *Engine[P, R]) deleteAll(ctx context.Context, label string) error {
	err := e.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(e.Namespace),
		client.MatchingLabels{ComponentLabel: e.Kind.Component}, client.HasLabels{label})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the %s round's ConfigMaps labelled %s: %w", e.Kind.Component, label, err)
	}
	return nil
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return "Secret"
	case *corev1.Service:
		return "Service"
	case *appsv1.DaemonSet:
		return "DaemonSet"
	}
	return fmt.Sprintf("%T", obj)
}
