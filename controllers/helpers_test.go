package controllers_test

import (
	"time"

	"context"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
)

var ctx = context.Background()

// poke changes an annotation of the WindowsReadiness, which wakes the
// reconciler without changing the spec (a patch: an update would rewrite
// the defaulted durations in Go's form and bump the generation).
func poke(key, value string) {
	wr := on.WR()
	base := wr.DeepCopy()
	if wr.Annotations == nil {
		wr.Annotations = map[string]string{}
	}
	wr.Annotations[key] = value
	Expect(k8s.Patch(ctx, wr, client.MergeFrom(base))).To(Succeed())
}

// seed seeds a cluster and waits until the simulated Calico is at rest.
func seed(cl calicosim.Cluster) {
	Expect(calicosim.Seed(ctx, k8s, cl)).To(Succeed())
	Expect(calicosim.WaitSettled(ctx, k8s, 30*time.Second)).To(Succeed(), "the simulated Calico is healthy before the test starts")
}

// resetCluster stops the operator, removes the WindowsReadiness, a test's
// Windows node and everything seeded, and resets the simulator, so that each
// spec leaves the cluster as it found it.
func resetCluster(op *operator) {
	if op != nil {
		op.stop()
	}
	deleteNode("win-1")
	// The stopped manager lets no WindowsReadiness go: its claims and
	// finalizer are lifted here.
	Expect(kit.ForgetWindowsReadiness(ctx, k8s, operatorNamespace)).To(Succeed())
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: operatorNamespace, Name: record.Name}}))).To(Succeed())
	sim.ClearFault()
	sim.ReleaseRollouts()
	sim.SetRolloutStep(0)
	sim.PodChecks().Reset()
	agents.Reset()
	// A probe round or pod network check round the spec left running goes
	// with it: the stopped operator no longer removes them, and envtest has
	// no garbage collector to follow their owner references.
	Expect((&probe.Engine{Kind: probe.RoundKind, Client: k8s, Namespace: probeNamespace}).Cleanup(ctx)).To(Succeed())
	Expect((&podcheck.Engine{Kind: podcheck.RoundKind, Client: k8s, Namespace: probeNamespace}).Cleanup(ctx)).To(Succeed())
	Expect(calicosim.Clean(ctx, k8s)).To(Succeed())
}

// probeAgentsName names the probe agents' DaemonSet.
var probeAgentsName = probe.RoundKind.Name

func deleteNode(name string) {
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
}

// wrEvents are the Events about the WindowsReadiness now applied: the
// default namespace holds every earlier spec's too.
func wrEvents() []eventsv1.Event {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace("default"))).To(Succeed())
	uid := on.WR().UID
	var own []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "WindowsReadiness" && e.Regarding.UID == uid {
			own = append(own, e)
		}
	}
	return own
}
