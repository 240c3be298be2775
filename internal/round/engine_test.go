package round

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/winready/winready/api/v1alpha1"
)

type params struct {
	Extra string `json:"extra"`
}

type result struct {
	Heard []netip.Addr `json:"heard"`
}

const ns = "winready-probe"

func testKind(planOnServe bool) Kind {
	return Kind{Name: "winready-test", Component: "test", PlanOnServe: planOnServe, Secret: !planOnServe,
		Pod: func(namespace, image string) corev1.PodSpec {
			return corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: image, Args: []string{"test", "--namespace=" + namespace}}}}
		},
		Objects: func(namespace string, owner []metav1.OwnerReference) []client.Object {
			return []client.Object{&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "winready-test", OwnerReferences: owner}}}
		}}
}

// bed is an API server's stand-in with n Linux nodes, recording the order
// of the writes.
type bed struct {
	t      *testing.T
	c      client.WithWatch
	writes []string
	engine *Engine[params, result]
	spec   Spec[params]
	clock  time.Time
}

func nodeNamed(i int) string { return fmt.Sprintf("node-%02d", i) }

func newBed(t *testing.T, n int, planOnServe bool) *bed {
	b := &bed{t: t, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var objs []client.Object
	for i := range n {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeNamed(i), Labels: map[string]string{"kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", i+1)}}}})
	}
	// Another kind's leftovers, which this kind's cleanup leaves alone.
	objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-report-node-00",
		Labels: map[string]string{ReportLabel: "old", ComponentLabel: "other"}}})
	record := func(verb string) func(obj client.Object) {
		return func(obj client.Object) {
			b.writes = append(b.writes, fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()))
		}
	}
	b.c = interceptor.NewClient(fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record("create")(obj)
			return c.Create(ctx, obj, opts...)
		},
	})
	b.engine = &Engine[params, result]{Kind: testKind(planOnServe), Client: b.c, Reader: b.c, Namespace: ns, Image: "winready:test"}
	b.spec = Spec[params]{ID: "g1-r1", Token: TokenOf("again"), Timeout: time.Minute,
		Params: func(context.Context) (params, error) { return params{Extra: "x"}, nil }}
	return b
}

func (b *bed) agent(node string) Agent[params, result] {
	return Agent[params, result]{Client: b.c, Kind: b.engine.Kind, Namespace: ns, Node: node}
}

// plan reads node's plan as its agent does (the fake client's watch does
// not replay what exists; the agent's watch is exercised against an API
// server in the controllers' security spec and the bench).
func (b *bed) plan(node string) (Plan[params], error) {
	cm := &corev1.ConfigMap{}
	if err := b.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: b.engine.Kind.PlanName(node)}, cm); err != nil {
		return Plan[params]{}, err
	}
	return DecodePlan[params](cm)
}

func (b *bed) configMaps(label string) []corev1.ConfigMap {
	list := &corev1.ConfigMapList{}
	if err := b.c.List(context.Background(), list, client.InNamespace(ns), client.HasLabels{label}); err != nil {
		b.t.Fatal(err)
	}
	return list.Items
}

func TestARoundPlansAtTheStartWritesEverythingBeforeTheAgentsAndJudgesAgainstItsPlans(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 3, false)
	var st v1alpha1.RoundState
	if err := b.engine.Start(ctx, b.clock, b.spec, &st); err != nil {
		t.Fatal(err)
	}
	if st.Round != "g1-r1" || st.RerunToken != string(TokenOf("again")) || st.Nodes != 3 || st.Paired != 3 || StageOf(&st) != Collecting {
		t.Fatalf("state %+v, stage %s", st, StageOf(&st))
	}
	if last := b.writes[len(b.writes)-1]; !strings.HasPrefix(last, "create *v1.DaemonSet winready-test") {
		t.Errorf("the agents start before all they read is written: %v", b.writes)
	}
	if got := len(b.configMaps(PlanLabel)); got != 3 {
		t.Fatalf("%d plans, want one a node", got)
	}

	// Each agent reads only its own plan, and the round's key.
	plan, err := b.plan("node-01")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Round != "g1-r1" || plan.Node != "node-01" || plan.Addr != netip.MustParseAddr("10.0.0.2") || len(plan.Peers) != 2 ||
		len(plan.Expect) != 2 || plan.Params.Extra != "x" || !plan.Start.Equal(b.clock) || !plan.End.Equal(b.clock.Add(time.Minute-ReportSlack)) {
		t.Fatalf("plan %+v", plan)
	}
	key, err := b.agent("node-01").Secret(ctx, "g1-r1")
	if err != nil || len(key) != 32 {
		t.Fatalf("the round's key: %d bytes, %v", len(key), err)
	}
	if _, err := b.agent("node-01").Secret(ctx, "g1-other"); err == nil {
		t.Fatal("a key is taken for another round's")
	}

	// Two of three report: the round waits, until its time is up.
	for _, n := range []string{"node-00", "node-01"} {
		if err := b.agent(n).Report(ctx, Report[result]{Round: "g1-r1", Stage: Done, Result: result{Heard: []netip.Addr{netip.MustParseAddr("10.0.0.3")}}}); err != nil {
			t.Fatal(err)
		}
	}
	progress, err := b.engine.Advance(ctx, b.clock.Add(10*time.Second), b.spec, &st)
	if err != nil || progress.Stage != Collecting || progress.Reported != 2 || progress.Expected != 3 || progress.Wait != 50*time.Second {
		t.Fatalf("progress %+v, %v", progress, err)
	}
	if err := b.agent("node-02").Report(ctx, Report[result]{Round: "g1-r1", Stage: Done, Error: "came up too late"}); err != nil {
		t.Fatal(err)
	}
	progress, err = b.engine.Advance(ctx, b.clock.Add(11*time.Second), b.spec, &st)
	if err != nil || progress.Stage != Complete {
		t.Fatalf("progress %+v, %v: every agent reported", progress, err)
	}
	res, ok, err := b.engine.Results(ctx, &st)
	if err != nil || !ok {
		t.Fatalf("results: %v, %v", ok, err)
	}
	if len(res.Plans) != 3 || !slices.IsSortedFunc(res.Plans, func(a, b Plan[params]) int { return strings.Compare(a.Node, b.Node) }) ||
		len(res.Reports) != 2 || res.Failed["node-02"] != "came up too late" || res.Reports["node-00"].Result.Heard[0] != netip.MustParseAddr("10.0.0.3") {
		t.Fatalf("results %+v", res)
	}

	// Cleanup removes this kind's objects and nothing of another kind's.
	if err := b.engine.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	left := b.configMaps(ReportLabel)
	if len(left) != 1 || left[0].Name != "other-report-node-00" || len(b.configMaps(PlanLabel)) != 0 {
		t.Errorf("left after cleanup: %v", left)
	}
	for _, obj := range []client.Object{&appsv1.DaemonSet{}, &corev1.Secret{}, &corev1.Service{}} {
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "winready-test"}, obj); err == nil {
			t.Errorf("%T left after cleanup", obj)
		}
	}
	if _, ok, _ := b.engine.Results(ctx, &st); ok {
		t.Error("results read once the plans are gone")
	}
}

func TestARoundThatPlansOnServePairsTheAgentsThatServeInTime(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 3, true)
	var st v1alpha1.RoundState
	if err := b.engine.Start(ctx, b.clock, b.spec, &st); err != nil {
		t.Fatal(err)
	}
	if StageOf(&st) != Pairing || len(b.configMaps(PlanLabel)) != 0 {
		t.Fatalf("stage %s with %d plans: a kind that plans on serving waits for its agents", StageOf(&st), len(b.configMaps(PlanLabel)))
	}
	for i, n := range []string{"node-00", "node-02"} {
		err := b.agent(n).Report(ctx, Report[result]{Round: "g1-r1", Stage: Serving, Addr: netip.AddrFrom4([4]byte{10, 244, 0, byte(i + 1)})})
		if err != nil {
			t.Fatal(err)
		}
	}
	progress, err := b.engine.Advance(ctx, b.clock.Add(10*time.Second), b.spec, &st)
	if err != nil || progress.Stage != Pairing || progress.Reported != 2 || progress.Wait != 20*time.Second {
		t.Fatalf("progress %+v, %v: pairing waits half the round for every agent", progress, err)
	}
	progress, err = b.engine.Advance(ctx, b.clock.Add(30*time.Second), b.spec, &st)
	if err != nil || progress.Stage != Collecting || progress.Expected != 2 || !slices.Equal(progress.Unpaired, []string{"node-01"}) {
		t.Fatalf("progress %+v, %v", progress, err)
	}
	if st.Paired != 2 || st.PlannedAt == nil || !st.PlannedAt.Time.Equal(b.clock.Add(30*time.Second)) {
		t.Fatalf("state %+v", st)
	}
	plan, err := b.plan("node-02")
	if err != nil || plan.Addr != netip.MustParseAddr("10.244.0.2") || !slices.Equal(plan.Peers, []netip.Addr{netip.MustParseAddr("10.244.0.1")}) {
		t.Fatalf("plan %+v, %v: paired at the address it serves at", plan, err)
	}
	// The report of the checks replaces the serving one.
	if err := b.agent("node-02").Report(ctx, Report[result]{Round: "g1-r1", Stage: Done, Addr: plan.Addr}); err != nil {
		t.Fatal(err)
	}
	if got := len(b.configMaps(ReportLabel)); got != 3 {
		t.Errorf("%d reports (another kind's included), want one an agent", got)
	}
}

func TestARoundInWhichNoAgentServesEndsHavingProvedNothing(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 2, true)
	var st v1alpha1.RoundState
	if err := b.engine.Start(ctx, b.clock, b.spec, &st); err != nil {
		t.Fatal(err)
	}
	progress, err := b.engine.Advance(ctx, b.clock.Add(time.Minute), b.spec, &st)
	if err != nil || !progress.NoneServed || progress.Stage != Complete || len(progress.Unpaired) != 2 {
		t.Fatalf("progress %+v, %v", progress, err)
	}
	if stopped, err := b.engine.Stop(ctx, &st); err != nil || !stopped {
		t.Fatalf("stopping the round: %v, %v", stopped, err)
	}
	st.CompletedAt = &metav1.Time{Time: b.clock}
	if stopped, _ := b.engine.Stop(ctx, &st); stopped {
		t.Error("a completed round is stopped again")
	}
}

func TestAStartThatFailsLeavesTheStateAlone(t *testing.T) {
	b := newBed(t, 2, false)
	refused := interceptor.NewClient(b.c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*appsv1.DaemonSet); ok {
				return fmt.Errorf("admission refused the agents")
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	b.engine.Client = refused
	st := v1alpha1.RoundState{Round: "earlier"}
	if err := b.engine.Start(context.Background(), b.clock, b.spec, &st); err == nil || st.Round != "earlier" {
		t.Fatalf("start: %v, state %+v", err, st)
	}
}

func TestAStartRemovesWhatAnEarlierRoundLeftUnlessThisProcessRemovedItLast(t *testing.T) {
	ctx := context.Background()
	b := newBed(t, 2, false)
	var removals []string
	b.engine.Client = interceptor.NewClient(b.c, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			removals = append(removals, fmt.Sprintf("delete %T", obj))
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			removals = append(removals, fmt.Sprintf("deletecollection %T", obj))
			return c.DeleteAllOf(ctx, obj, opts...)
		},
	})
	b.engine.Removed = &Removed{}
	start := func(what string, wantRemovals int) {
		t.Helper()
		removals = nil
		var st v1alpha1.RoundState
		if err := b.engine.Start(ctx, b.clock, b.spec, &st); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(removals) != wantRemovals {
			t.Errorf("%s: removals %v, want %d", what, removals, wantRemovals)
		}
	}
	// The DaemonSet, the Secret, the Service, the reports and the plans.
	const everything = 5
	// A new process knows nothing of what an earlier one left.
	start("the first start", everything)
	// A round started again before it ended (its plans gone) may have left
	// anything.
	start("a start before the round's end", everything)
	if err := b.engine.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	start("the start after this process removed the round", 0)
	if len(b.configMaps(PlanLabel)) != 2 {
		t.Errorf("plans %d, want one per node", len(b.configMaps(PlanLabel)))
	}

	// A restarted process (a new Removed) removes an earlier round's
	// leftovers: a start that creates its DaemonSet over the old one fails.
	if err := b.engine.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	leftover := DaemonSet(b.engine.Kind, ns, "winready:old", "g0-r0", nil)
	if err := b.c.Create(ctx, leftover); err != nil {
		t.Fatal(err)
	}
	b.engine.Removed = &Removed{}
	start("the first start of a restarted process", everything)
	ds := &appsv1.DaemonSet{}
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(leftover), ds); err != nil || ds.Spec.Template.Annotations[RoundAnnotation] != string(b.spec.ID) {
		t.Errorf("the agents: %v, round %q, want %q", err, ds.Spec.Template.Annotations[RoundAnnotation], b.spec.ID)
	}
}

func TestTheRerunToken(t *testing.T) {
	if TokenOf("") != "" || TokenOf("a") == TokenOf("b") || len(TokenOf("a long annotation value, a date")) > 8 {
		t.Fatal("tokens")
	}
	for _, tc := range []struct {
		st   v1alpha1.RoundState
		want Token
	}{
		{v1alpha1.RoundState{Round: "g1-t5r2b3-0a1b2c", RerunToken: "abc"}, "abc"},
		{v1alpha1.RoundState{Round: "g1-t5r2b3-0a1b2c"}, ""},
		// Recorded before the token had a field: in the ID.
		{v1alpha1.RoundState{Round: "g1-t5r2b3-r" + string(TokenOf("x"))}, TokenOf("x")},
		{v1alpha1.RoundState{Round: "g1-r5r2b3"}, ""},
	} {
		if got := TokenOfState(&tc.st); got != tc.want {
			t.Errorf("%+v: token %q, want %q", tc.st, got, tc.want)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if a, b := NewID(3, now), NewID(3, now); a == b || !strings.HasPrefix(string(a), "g3-") || TokenOfState(&v1alpha1.RoundState{Round: string(a)}) != "" {
		t.Fatalf("IDs %s and %s", a, b)
	}
}

func TestObjectNamesFitWhateverTheNode(t *testing.T) {
	long := strings.Repeat("n", 253)
	k := testKind(false)
	for _, name := range []string{k.PlanName(long), k.ReportName(long)} {
		if len(name) > 253 {
			t.Errorf("%d characters: %s", len(name), name)
		}
	}
	if k.ReportName(long) == k.ReportName(long[:252]+"m") || k.ReportName("node-a") != "winready-test-report-node-a" {
		t.Error("report names")
	}
}

func TestWindow(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Plan[params]{Start: start, End: start.Add(30 * time.Second)}
	if from, until, err := p.Window(start.Add(-time.Second), time.Second); err != nil || !from.Equal(start) || !until.Equal(p.End) {
		t.Errorf("an early agent: %v %v %v", from, until, err)
	}
	if from, _, err := p.Window(start.Add(20*time.Second), time.Second); err != nil || !from.Equal(start.Add(20*time.Second)) {
		t.Errorf("a late agent: %v %v", from, err)
	}
	if _, _, err := p.Window(start.Add(29*time.Second), 2*time.Second); err == nil || !strings.Contains(err.Error(), "too late") {
		t.Errorf("a too late agent: %v", err)
	}
}

func TestTruncate(t *testing.T) {
	if Truncate("short", 10) != "short" {
		t.Error("a short string is cut")
	}
	got := Truncate(strings.Repeat("é", 100), 51)
	if len(got) > 51 || !strings.HasSuffix(got, " ...") || !strings.HasPrefix(got, "é") {
		t.Errorf("cut to %q", got)
	}
	var l Listed[int]
	for i := range 30 {
		l.Add(func() int { return i })
	}
	if l.Count != 30 || len(l.First) != v1alpha1.MaxListed {
		t.Errorf("listed %d of %d", len(l.First), l.Count)
	}
}

// TestAReportsErrorIsBoundedAsRead: an agent writes its report itself, so
// an error longer than a report may hold is cut as it is read, and fits the
// status's MissingReasons.
func TestAReportsErrorIsBoundedAsRead(t *testing.T) {
	k := Kind{Component: "probe"}
	cm, err := ReportObject(k, "ns", Report[params]{Round: "r", Node: "node-0", Stage: Done, Error: "late"})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[ErrorKey] = strings.Repeat("x", 5000)
	if got := DecodeReport[params](cm).Error; len(got) > maxError || !strings.HasSuffix(got, " ...") {
		t.Errorf("an error of 5000 bytes read as %d bytes", len(got))
	}
}

// TestARoundOf5000NodesWith253CharacterNamesFits: each agent's plan and
// report is about a kilobyte, whatever the cluster's size.
func TestARoundOf5000NodesWith253CharacterNamesFits(t *testing.T) {
	members := make([]Member, 5000)
	for i := range members {
		name := fmt.Sprintf("%05d.", i) + strings.Repeat(strings.Repeat("n", 62)+".", 4)
		members[i] = Member{Node: name[:253], Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})}
	}
	k := testKind(false)
	largest := 0
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, a := range Pair(members, "seed") {
		plan, err := PlanObject(k, ns, Plan[params]{Round: NewID(1, start), Node: a.Node, Addr: a.Addr, Start: start, End: start.Add(time.Minute),
			Peers: a.Peers, Expect: a.Expect, Params: params{Extra: strings.Repeat("x", 64)}})
		if err != nil {
			t.Fatal(err)
		}
		report, err := ReportObject(k, ns, Report[result]{Round: NewID(1, start), Node: a.Node, Stage: Done, Addr: a.Addr,
			Result: result{Heard: a.Expect}})
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range []client.Object{plan, report} {
			out, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			largest = max(largest, len(out))
		}
	}
	t.Logf("the largest plan or report: %d bytes", largest)
	if largest > 2<<10 {
		t.Fatalf("an object of %d bytes: an agent's part grows with the cluster", largest)
	}
}
