package passes_test

import (
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
	"github.com/winready/winready/test/kit/look"
)

// inlineBed drives winready and the simulated Calico by hand, in the spec's
// goroutine, on one fake clock (karpenter's ExpectObjectReconciled): the
// simulator runs until it has nothing left to do, then winready makes one
// pass. What a spec asserts follows from the order of the calls alone, never
// from the timing of watches, workqueues and polls.
//
// A pass is woken as the manager's watches would wake it: by a write to the
// cluster since the last pass began (the simulator's, the spec's or
// winready's own, as the mirror records it) whose event, as an informer of
// the manager's cache delivers it, passes the predicate of its kind's watch
// (controllers.Watches, wakes_test.go), else by the time it asked to be
// looked at again, to which the clock then moves. A write to a kind no
// watch covers, or to an object the cache does not select, wakes nothing;
// the first pass, and the first after a restart, always run. That the
// manager runs these watches is the business of the specs that run it.
type inlineBed struct {
	// The spec's client (the mirror), the reads of look over it, and the
	// simulator and probe agents the spec breaks the cluster with.
	k8s    client.Client
	on     look.Cluster
	sim    *calicosim.Simulator
	agents *calicosim.ProbeAgents

	r      *controllers.Reconciler
	calico *calicosim.Inline
	clock  *clocktesting.FakeClock
	events *eventLog
	c      *mirrorClient
	// reads counts winready's reads through its client and its API reader
	// (metrics.ReadCounter), across restarts.
	reads *metrics.ReadCounter

	// watches decide which writes wake a pass: the manager's.
	watches *watches

	result ctrl.Result
	passes int
	// seen counts the mirror's changes as the last pass began: those after
	// it are what would wake the next.
	seen int
}

// maxPasses bounds reconcileUntil: a migration of the reference cluster
// takes a few dozen passes.
const maxPasses = 500

// driveInline seeds cl and returns a bed whose simulator has brought it to
// rest; the spec's clean-up removes what it seeded and what winready made.
func driveInline(cl calicosim.Cluster) *inlineBed {
	GinkgoHelper()
	api, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(clean, api)
	c := newMirror(api)
	b := &inlineBed{clock: clocktesting.NewFakeClock(time.Now()), events: &eventLog{}, c: c, reads: metrics.NewReadCounter(scheme),
		watches: newWatches(controllers.Watches())}
	// The spec's own reads and writes go through the mirror too.
	b.k8s, b.on = c, look.On(ctx, c)
	// No pacing: what the specs here assert follows from the order of the
	// writes, which the rollout's and the status's delays do not change.
	b.calico = calicosim.NewInline(c, b.clock, calicosim.Options{RolloutStep: -1, StatusLag: -1}, probeNamespace)
	// The spec's b.sim.InjectFault, b.agents.Block, ... act on this simulator.
	b.sim, b.agents = b.calico.Sim, b.calico.Agents
	b.r = b.newReconciler()
	Expect(calicosim.Seed(ctx, b.k8s, cl)).To(Succeed())
	b.settle()
	settled, why, err := calicosim.Settled(ctx, b.k8s)
	Expect(err).NotTo(HaveOccurred())
	Expect(settled).To(BeTrue(), "the simulated Calico is at rest before the spec starts: %s", why)
	return b
}

// newReconciler is winready as a manager starts it: it knows nothing of
// earlier passes.
func (b *inlineBed) newReconciler() *controllers.Reconciler {
	return controllers.NewReconciler(controllers.Deps{Client: b.c, APIReader: b.c,
		Discovery: discovery.NewDiscoveryClientForConfigOrDie(cfg), Recorder: b.events, Reads: b.reads}, scheme,
		controllers.Options{Namespace: operatorNamespace, ProbeNamespace: probeNamespace, ProbeImage: probeImage, Clock: b.clock})
}

// restart replaces winready with a new one, as a restarted manager or a new
// leader: what the old one remembered between passes is gone, and its first
// pass reads everything past the cache.
func (b *inlineBed) restart() {
	b.r = b.newReconciler()
	b.passes, b.result = 0, ctrl.Result{}
}

// settle runs the simulator until it has nothing left to do.
func (b *inlineBed) settle() {
	GinkgoHelper()
	Expect(b.calico.Settle(ctx)).To(Succeed())
}

// pass runs one pass of winready, as its workqueue would.
func (b *inlineBed) pass() {
	GinkgoHelper()
	_, b.seen = b.c.Changes(b.seen)
	res, err := b.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: v1alpha1.Name}})
	Expect(err).NotTo(HaveOccurred(), "pass %d", b.passes+1)
	b.result = res
	b.passes++
}

// woken says whether anything would wake winready: the first pass, or a
// write since the last pass began that its watches pass.
func (b *inlineBed) woken() bool {
	if b.passes == 0 {
		return true
	}
	since, _ := b.c.Changes(b.seen)
	for _, c := range since {
		if b.watches.wakes(c) {
			return true
		}
	}
	return false
}

// wake says whether anything wakes winready now: a write since its last
// pass, else the time it asked to be looked at again, to which the clock
// then moves. It is false when nothing is left to wake it.
func (b *inlineBed) wake() bool {
	GinkgoHelper()
	if b.woken() {
		return true
	}
	if b.result.RequeueAfter <= 0 {
		return false
	}
	b.clock.Step(b.result.RequeueAfter)
	return true
}

// reconcileUntil runs passes, the simulator settling before each, until
// actual() satisfies matcher; it fails when nothing is left to wake winready
// first, with the status message as it stands.
func reconcileUntil[T any](b *inlineBed, actual func() T, matcher types.GomegaMatcher, description ...any) {
	GinkgoHelper()
	for range maxPasses {
		b.settle()
		if ok, err := matcher.Match(actual()); err == nil && ok {
			return
		}
		if !b.wake() {
			why := fmt.Sprintf("nothing wakes winready any more after %d passes; its status: %q", b.passes, b.on.WR().Status.Message)
			if len(description) > 0 {
				why = describe(description) + "; " + why
			}
			Expect(actual()).To(matcher, why)
			return
		}
		b.pass()
	}
	Fail(fmt.Sprintf("not reached after %d passes: %s", maxPasses, matcher.FailureMessage(actual())))
}

// describe is a Gomega description: a format and its arguments, or values.
func describe(description []any) string {
	if format, ok := description[0].(string); ok {
		return fmt.Sprintf(format, description[1:]...)
	}
	return fmt.Sprint(description...)
}

// rest runs passes until nothing wakes winready within horizon: it has
// settled, and a spec may assert what did not change (Consistently, inline).
func (b *inlineBed) rest(horizon time.Duration) {
	GinkgoHelper()
	until := b.clock.Now().Add(horizon)
	for range maxPasses {
		b.settle()
		if !b.woken() && (b.result.RequeueAfter <= 0 || b.clock.Now().Add(b.result.RequeueAfter).After(until)) {
			return
		}
		b.wake()
		b.pass()
	}
	Fail(fmt.Sprintf("winready is still busy after %d passes: %q", maxPasses, b.on.WR().Status.Message))
}

// eventLog records winready's Events: "<type> <reason> <note>".
type eventLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *eventLog) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s %s %s", eventtype, reason, fmt.Sprintf(note, args...)))
}

// count is how many Events begin with prefix ("<type> <reason>").
func (l *eventLog) count(prefix string) int {
	n := 0
	for _, e := range l.all() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// clean removes what a spec seeded and what winready made, past the mirror,
// so that the next spec starts from an empty cluster.
func clean(api client.Client) {
	GinkgoHelper()
	Expect(kit.ForgetWindowsReadiness(ctx, api, operatorNamespace)).To(Succeed())
	Expect(client.IgnoreNotFound(api.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: operatorNamespace, Name: record.Name}}))).To(Succeed())
	Expect(api.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{calico.OSLabel: calico.OSWindows})).To(Succeed())
	Expect((&probe.Engine{Kind: probe.RoundKind, Client: api, Namespace: probeNamespace}).Cleanup(ctx)).To(Succeed())
	Expect((&podcheck.Engine{Kind: podcheck.RoundKind, Client: api, Namespace: probeNamespace}).Cleanup(ctx)).To(Succeed())
	Expect(calicosim.Clean(ctx, api)).To(Succeed())
}

// deleteWR deletes the WindowsReadiness as a person does, and runs passes
// until winready has lifted its claims and let it go.
func deleteWR(b *inlineBed) {
	GinkgoHelper()
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	Expect(b.k8s.Delete(ctx, wr)).To(Succeed())
	reconcileUntil(b, func() bool { return apierrors.IsNotFound(b.k8s.Get(ctx, client.ObjectKeyFromObject(wr), wr)) }, BeTrue(),
		"winready removes its finalizer")
}
