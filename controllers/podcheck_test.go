package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/test/calicosim"
)

// checkBed runs checkPodNetwork reconcile by reconcile against an API
// server's stand-in, with the simulator playing the check pods in between.
type checkBed struct {
	t     testing.TB
	c     client.Client
	r     *Reconciler
	clock *clocktesting.FakeClock
	pods  *calicosim.PodChecks
	// podClient is the check pods'; writes are counted per client.
	podClient                 client.Client
	writes                    writeCount
	operatorWrites, podWrites int
	// agents plays the probe's agents; largest is the largest object
	// written, as JSON.
	agents  *calicosim.ProbeAgents
	largest int
}

const checkNamespace = "winready-probe"

func newCheckBed(t testing.TB, nodes int, spec v1alpha1.PodNetworkCheckSpec) *checkBed {
	names := make([]string, nodes)
	for i := range nodes {
		names[i] = fmt.Sprintf("node-%c", 'a'+i)
	}
	return newCheckBedOf(t, names, spec)
}

func newCheckBedOf(t testing.TB, nodes []string, spec v1alpha1.PodNetworkCheckSpec) *checkBed {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{&v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name, UID: "uid-1", Generation: 1},
		Spec: v1alpha1.WindowsReadinessSpec{PodNetworkCheck: spec}}}
	for i, name := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP,
				Address: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).String()}}}})
	}
	// A tracker without managed fields: the field-managed one costs
	// milliseconds a write, which a 5,000-node round cannot afford.
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.WindowsReadiness{}).Build()
	b := &checkBed{t: t, c: c, clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		pods: calicosim.NewPodChecks(checkNamespace), agents: calicosim.NewProbeAgents(checkNamespace)}
	b.writes.largest = &b.largest
	b.r = &Reconciler{Client: interceptor.NewClient(c, b.writes.count(&b.operatorWrites)), APIReader: c, Clock: b.clock,
		opts: Options{ProbeNamespace: checkNamespace, ProbeImage: "winready:test", Clock: b.clock}.withDefaults()}
	b.podClient = interceptor.NewClient(c, b.writes.count(&b.podWrites))
	return b
}

// writeCount counts the writes made through a client, and keeps the size of
// the largest object written. A round writes its plan's chunks from several
// goroutines at once: the counts are taken under a lock.
type writeCount struct {
	mu      sync.Mutex
	largest *int
}

// add counts one write into n, and obj's size when it is written whole.
func (w *writeCount) add(n *int, obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*n++
	if obj == nil || w.largest == nil {
		return
	}
	if out, err := json.Marshal(obj); err == nil {
		*w.largest = max(*w.largest, len(out))
	}
}

func (w *writeCount) count(n *int) interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add(n, obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add(n, obj)
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add(n, nil)
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			w.add(n, nil)
			return c.DeleteAllOf(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add(n, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// reconcile runs one pass of the check for trigger, concludes it and saves
// the status, as Reconcile does.
func (b *checkBed) reconcile(trigger v1alpha1.StepName) (*scope, bool) {
	b.t.Helper()
	ctx := context.Background()
	wr := &v1alpha1.WindowsReadiness{}
	if err := b.c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr); err != nil {
		b.t.Fatal(err)
	}
	s := &scope{wr: wr, before: wr.DeepCopy(), now: b.clock.Now()}
	o := podCheck{b.r, trigger}.reconcile(ctx, s)
	if o.Err != nil {
		b.t.Fatalf("the pod check for %s: %v", trigger, o.Err)
	}
	if _, err := b.r.conclude(ctx, s, o); err != nil {
		b.t.Fatal(err)
	}
	if err := b.r.persist(ctx, s); err != nil {
		b.t.Fatal(err)
	}
	return s, o.Done()
}

// run reconciles until the check for trigger is done or stalled, the
// simulated pods playing their part and the clock moving between passes.
func (b *checkBed) run(trigger v1alpha1.StepName) (*scope, bool) {
	b.t.Helper()
	for range 20 {
		p, done := b.reconcile(trigger)
		if done || conditions.IsTrue(p.wr, conditions.Stalled) {
			return p, done
		}
		if _, due := podCheckRevertDue(p); due {
			return p, false
		}
		if err := b.pods.Play(context.Background(), b.podClient, b.c); err != nil {
			b.t.Fatal(err)
		}
		b.clock.Step(podCheckPoll)
	}
	b.t.Fatalf("the check for %s neither finished nor stalled", trigger)
	return nil, false
}

// runProbe reconciles the UDP probe until its round is done or stalled, the
// simulated agents playing their part.
func (b *checkBed) runProbe() (*scope, bool) {
	b.t.Helper()
	ctx := context.Background()
	for range 20 {
		wr := &v1alpha1.WindowsReadiness{}
		if err := b.c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr); err != nil {
			b.t.Fatal(err)
		}
		if wr.Status.Preflight == nil {
			wr.Status.Preflight = &v1alpha1.PreflightStatus{}
		}
		p := &scope{wr: wr, before: wr.DeepCopy(), now: b.clock.Now()}
		o := probeRound{b.r}.reconcile(ctx, p)
		if o.Err != nil {
			b.t.Fatalf("the probe round: %v", o.Err)
		}
		if _, err := b.r.conclude(ctx, p, o); err != nil {
			b.t.Fatal(err)
		}
		if err := b.r.persist(ctx, p); err != nil {
			b.t.Fatal(err)
		}
		if o.Done() || conditions.IsTrue(p.wr, conditions.Stalled) {
			return p, o.Done()
		}
		if err := b.agents.Play(ctx, b.podClient, b.c); err != nil {
			b.t.Fatal(err)
		}
		b.clock.Step(time.Second)
	}
	b.t.Fatal("the probe neither finished nor stalled")
	return nil, false
}

// leftOver lists the round's objects still in the namespace.
func (b *checkBed) leftOver() []string {
	ctx := context.Background()
	var left []string
	key := client.ObjectKey{Namespace: checkNamespace, Name: podcheck.Name}
	for _, obj := range []client.Object{&appsv1.DaemonSet{}, &corev1.Service{}, &corev1.ConfigMap{}} {
		if err := b.c.Get(ctx, key, obj); err == nil {
			left = append(left, fmt.Sprintf("%T", obj))
		}
	}
	reports := &corev1.ConfigMapList{}
	if err := b.c.List(ctx, reports, client.InNamespace(checkNamespace)); err != nil {
		b.t.Fatal(err)
	}
	for _, cm := range reports.Items {
		left = append(left, cm.Name)
	}
	return left
}

func stalledMessage(p *scope) string {
	if c := meta.FindStatusCondition(p.wr.Status.Conditions, conditions.Stalled); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason + ": " + c.Message
	}
	return ""
}

func failing(r *v1alpha1.PodCheckRound) []string {
	var got []string
	for _, f := range r.Failing {
		got = append(got, f.From+"->"+f.To+" "+string(f.Verdict))
	}
	return got
}

func TestPodCheckPassesAfterTheBaselineAndCleansUp(t *testing.T) {
	b := newCheckBed(t, 3, v1alpha1.PodNetworkCheckSpec{})
	if _, done := b.run(BaselineCheck); !done {
		t.Fatal("the baseline did not finish")
	}
	p, done := b.run(v1alpha1.StepEncapsulation)
	if !done {
		t.Fatalf("the check after Encapsulation did not pass: %s", stalledMessage(p))
	}
	st := p.wr.Status.PodNetworkCheck
	if st.Baseline.TestedPairs != 6 || st.Last.TestedPairs != 6 || st.Last.Worse || st.Last.PodMTU != 1450 {
		t.Errorf("baseline %+v, last %+v", st.Baseline, st.Last)
	}
	if len(st.Passed) != 1 || st.Passed[0] != v1alpha1.StepEncapsulation {
		t.Errorf("passed %v, want [Encapsulation]", st.Passed)
	}
	if st.Seed != st.Baseline.Round {
		t.Errorf("seed %q, want the baseline's round %q", st.Seed, st.Baseline.Round)
	}
	if left := b.leftOver(); len(left) > 0 {
		t.Errorf("left after the round: %v", left)
	}
	if _, done := b.reconcile(v1alpha1.StepEncapsulation); !done {
		t.Error("a passed step is checked again")
	}
}

func TestPodCheckStopsWithTheDiagnosis(t *testing.T) {
	for _, tc := range []struct {
		name     string
		breakIt  func(*calicosim.PodChecks)
		failing  []string
		mentions []string
	}{
		{"checksum offload", func(c *calicosim.PodChecks) { c.Break(calicosim.FaultTCP) },
			[]string{"node-a->node-b ChecksumOffload", "node-a->node-c ChecksumOffload", "node-b->node-a ChecksumOffload",
				"node-b->node-c ChecksumOffload", "node-c->node-a ChecksumOffload", "node-c->node-b ChecksumOffload"},
			[]string{"checksum offload: ICMP passes but TCP does not on 6 pairs", "ChecksumOffloadBroken=true", "Service: pods on node-a, node-b, node-c"}},
		{"MTU", func(c *calicosim.PodChecks) { c.Break(calicosim.FaultMTU) }, nil,
			[]string{"MTU: small TCP passes but full-size TCP does not on 6 pairs", "Pods use MTU 1450", "spec.calicoNetwork.mtu in the Installation to 1350"}},
		{"VXLAN path", func(c *calicosim.PodChecks) { c.BreakPair("node-a", "node-c") },
			[]string{"node-a->node-c VXLANPath", "node-c->node-a VXLANPath"},
			[]string{"VXLAN path: nothing passes (ICMP, TCP) on 2 pairs: node-a -> node-c, node-c -> node-a."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newCheckBed(t, 3, v1alpha1.PodNetworkCheckSpec{})
			b.run(BaselineCheck)
			tc.breakIt(b.pods)
			p, done := b.run(v1alpha1.StepEncapsulation)
			msg := stalledMessage(p)
			t.Log(msg)
			if done || !strings.HasPrefix(msg, ReasonPodNetworkCheckFailed+": pod network check after step Encapsulation: the pod network is worse") {
				t.Fatalf("done %v, stalled %q", done, msg)
			}
			for _, m := range append(tc.mentions, "kubectl winready rerun podcheck", "kubectl annotate wr default winready.io/rerun-podcheck=") {
				if !strings.Contains(msg, m) {
					t.Errorf("the message lacks %q", m)
				}
			}
			if tc.failing != nil && strings.Join(failing(p.wr.Status.PodNetworkCheck.Last), " ") != strings.Join(tc.failing, " ") {
				t.Errorf("failing %v, want %v", failing(p.wr.Status.PodNetworkCheck.Last), tc.failing)
			}
			if left := b.leftOver(); len(left) > 0 {
				t.Errorf("left after the round: %v", left)
			}
			// Mended and asked again, the check runs anew and passes.
			b.pods.Reset()
			b.annotate(RerunPodCheckAnnotation, "1")
			if p, done := b.run(v1alpha1.StepEncapsulation); !done {
				t.Fatalf("the rerun did not pass: %s", stalledMessage(p))
			}
		})
	}
}

func (b *checkBed) annotate(key, value string) {
	b.t.Helper()
	wr := &v1alpha1.WindowsReadiness{}
	ctx := context.Background()
	if err := b.c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr); err != nil {
		b.t.Fatal(err)
	}
	wr.Annotations = map[string]string{key: value}
	if err := b.c.Update(ctx, wr); err != nil {
		b.t.Fatal(err)
	}
}

func TestPodCheckRevertMode(t *testing.T) {
	b := newCheckBed(t, 3, v1alpha1.PodNetworkCheckSpec{OnFailure: v1alpha1.PodCheckRevert})
	b.run(BaselineCheck)
	b.pods.Break(calicosim.FaultTCP)
	p, done := b.run(v1alpha1.StepBGP)
	step, due := podCheckRevertDue(p)
	if done || !due || step != v1alpha1.StepBGP || stalledMessage(p) != "" {
		t.Fatalf("done %v, revert due %v for %q, stalled %q: want BGP reverted before stalling", done, due, step, stalledMessage(p))
	}
	if o := podCheckBlocked(p, v1alpha1.StepBGP); o.Reason != ReasonPodNetworkCheckFailed {
		t.Errorf("BGP may be applied again while its check failed (%q)", o.Reason)
	}
	o := podCheckReverted(p, step)
	if _, err := b.r.conclude(context.Background(), p, o); err != nil {
		t.Fatal(err)
	}
	if msg := stalledMessage(p); !strings.Contains(msg, "step BGP was reverted because pod network check after step BGP") {
		t.Errorf("stalled %q", msg)
	}
	if _, due := podCheckRevertDue(p); due {
		t.Error("the revert is due again once done")
	}
	if err := b.r.persist(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	b.annotate(RerunPodCheckAnnotation, "2")
	p, _ = b.reconcile(v1alpha1.StepEncapsulation)
	if o := podCheckBlocked(p, v1alpha1.StepBGP); !o.Done() {
		t.Errorf("BGP stays blocked after a rerun was asked: %s", o.Message)
	}
}

func TestPodCheckMissingPodsAndDisabled(t *testing.T) {
	b := newCheckBed(t, 3, v1alpha1.PodNetworkCheckSpec{})
	b.run(BaselineCheck)
	b.pods.Silence("node-b")
	p, done := b.run(v1alpha1.StepServicesEndpoint)
	if last := p.wr.Status.PodNetworkCheck.Last; done || last.Paired != 2 || strings.Join(last.Missing, ",") != "node-b" {
		t.Fatalf("done %v, paired %d, missing %v: want node-b missing", done, last.Paired, last.Missing)
	}
	if msg := stalledMessage(p); !strings.Contains(msg, "no report from the check pods on node-b") {
		t.Errorf("stalled %q", msg)
	}

	// No pod serves at all: the check proves nothing, before the first
	// change as after a step.
	none := newCheckBed(t, 2, v1alpha1.PodNetworkCheckSpec{})
	none.pods.Silence("node-a")
	none.pods.Silence("node-b")
	p, done = none.run(BaselineCheck)
	if msg := stalledMessage(p); done || !strings.Contains(msg, "no check pod served within 1m30s on any of the 2 Linux nodes") {
		t.Errorf("done %v, stalled %q", done, msg)
	}
	if left := none.leftOver(); len(left) > 0 {
		t.Errorf("left after the round: %v", left)
	}

	off := newCheckBed(t, 3, v1alpha1.PodNetworkCheckSpec{Disabled: true})
	p, done = off.reconcile(BaselineCheck)
	if !done || !p.wr.Status.PodNetworkCheck.Disabled || len(off.leftOver()) > 0 {
		t.Errorf("disabled: done %v, status %+v, objects %v", done, p.wr.Status.PodNetworkCheck, off.leftOver())
	}
	if c := podCheckPreflight(v1alpha1.PodNetworkCheckSpec{Disabled: true}); c.Result != v1alpha1.CheckWarn {
		t.Errorf("disabled is recorded as %s, want a warning", c.Result)
	}
}

func TestPodCheckPodsMeetTheRestrictedLevel(t *testing.T) {
	b := newCheckBed(t, 1, v1alpha1.PodNetworkCheckSpec{})
	b.reconcile(BaselineCheck)
	ds := &appsv1.DaemonSet{}
	if err := b.c.Get(context.Background(), client.ObjectKey{Namespace: checkNamespace, Name: podcheck.Name}, ds); err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0].SecurityContext
	switch {
	case spec.HostNetwork || spec.HostPID || spec.HostIPC:
		t.Error("uses a host namespace")
	case !*spec.SecurityContext.RunAsNonRoot || *spec.SecurityContext.RunAsUser == 0:
		t.Error("runs as root")
	case spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("no RuntimeDefault seccomp profile")
	case *c.AllowPrivilegeEscalation || !*c.ReadOnlyRootFilesystem || len(c.Capabilities.Add) > 0 || c.Capabilities.Drop[0] != "ALL":
		t.Errorf("container security context %+v", c)
	case ds.Labels["app.kubernetes.io/component"] != "podcheck":
		t.Errorf("labels %v", ds.Labels)
	}
}

// TestBothRoundsOf5000NodesWith253CharacterNamesFit runs the UDP probe and
// the pod network check's baseline on 5,000 nodes whose names have 253
// characters: no object written is larger than 256 KiB (a plan or a report
// is about a kilobyte), each round writes at most 3 objects a node and a few
// for itself, and both pass.
func TestBothRoundsOf5000NodesWith253CharacterNamesFit(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 nodes")
	}
	const n = 5000
	names := make([]string, n)
	for i := range names {
		// Four DNS labels of 63 characters and a first of 1 + the number.
		names[i] = fmt.Sprintf("%c%04d", 'a'+i%26, i) + strings.Repeat("."+strings.Repeat("n", 61)+"x", 4)[:248]
		if len(names[i]) != 253 {
			t.Fatalf("a name of %d characters", len(names[i]))
		}
	}
	bed := newCheckBedOf(t, names, v1alpha1.PodNetworkCheckSpec{})
	p, done := bed.runProbe()
	probe := p.wr.Status.Preflight.Probe
	if !done || probe.Nodes != n || probe.PassedPairs != 3*n || probe.MissingReports != 0 {
		t.Fatalf("the probe: done %v, %+v", done, probe)
	}
	probeWrites := bed.operatorWrites + bed.podWrites
	bed.operatorWrites, bed.podWrites = 0, 0
	p, done = bed.run(BaselineCheck)
	base := p.wr.Status.PodNetworkCheck.Baseline
	if !done || base.Worse || int(base.Paired) != n || int(base.TestedPairs) != 3*n {
		t.Fatalf("the baseline: done %v, %+v", done, base)
	}
	checkWrites := bed.operatorWrites + bed.podWrites
	t.Logf("writes: the probe %d, the pod check %d; the largest object %d bytes", probeWrites, checkWrites, bed.largest)
	if probeWrites > 2*n+20 || checkWrites > 3*n+20 {
		t.Errorf("the probe wrote %d objects, the pod check %d: more than 2 and 3 a node", probeWrites, checkWrites)
	}
	if bed.largest > 256<<10 {
		t.Errorf("an object of %d bytes was written", bed.largest)
	}
	if left := bed.leftOver(); len(left) > 0 {
		t.Errorf("%d objects left after the rounds", len(left))
	}
}

// BenchmarkPodCheckRound runs a baseline and a round after a step, with
// every pair broken, on clusters of growing size, and checks that the round stays
// O(N): one pod per node, three peers per pod above 16 nodes, a plan per pod
// and a constant number of the operator's writes, two reports per pod, and a
// status under its bound whatever the node names' length.
func BenchmarkPodCheckRound(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("%s-%05d", strings.Repeat("n", 240), i)
			}
			for range b.N {
				bed := newCheckBedOf(b, names, v1alpha1.PodNetworkCheckSpec{})
				bed.run(BaselineCheck)
				bed.operatorWrites, bed.podWrites = 0, 0
				// Every pair fails and every Service check too: the lists in
				// the status fill up to their bounds.
				bed.pods.Break(calicosim.FaultTCP)
				bed.pods.BreakPair(names[0], names[1])
				p, _ := bed.run(v1alpha1.StepEncapsulation)
				last := p.wr.Status.PodNetworkCheck.Last
				status, err := json.Marshal(p.wr.Status)
				if err != nil {
					b.Fatal(err)
				}
				peers := min(n-1, 3)
				if n <= 16 {
					peers = n - 1
				}
				if int(last.TestedPairs) != n*peers || int(last.Paired) != n {
					b.Fatalf("%d pods tested %d pairs, want %d pods and %d pairs", last.Paired, last.TestedPairs, n, n*peers)
				}
				if bed.podWrites != 2*n || bed.operatorWrites > n+20 {
					b.Fatalf("%d writes by the pods, %d by the operator: want 2 per pod, and a plan per pod and a constant", bed.podWrites, bed.operatorWrites)
				}
				if len(status) > 64<<10 {
					b.Fatalf("status of %d bytes", len(status))
				}
				b.ReportMetric(float64(last.TestedPairs), "pairs")
				b.ReportMetric(float64(bed.operatorWrites), "operator-writes")
				b.ReportMetric(float64(bed.podWrites), "pod-writes")
				b.ReportMetric(float64(len(status)), "status-bytes")
			}
		})
	}
}
