package admission_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/probe"
	"github.com/winready/winready/internal/round"
)

const (
	probeNS   = "winready-probe"
	leaseName = "winready.winready.io"
	// holder is leader election's identity in a manager pod: its hostname
	// (the pod's name) and a UUID.
	holder = "winready-manager-7d9f8b6c5d-x2x4z_0b7c2a1e-3f4d-4c5b-9a6e-1d2c3b4a5f6e"
)

// fourByte is n characters of four bytes each in UTF-8: CEL's size() of it
// is n, its size in etcd 4n.
func fourByte(n int) string { return strings.Repeat("\U0001F600", n) }

// both expects a write refused for the manager's identity by policy and
// admitted for an admin, both as dry runs.
func both(policy string, write func(client.Client) error) {
	GinkgoHelper()
	Expect(write(manager)).To(refusedBy(policy), "refused for the manager's identity")
	Expect(write(k8s)).To(Succeed(), "admitted for an admin")
}

// createAs is a dry-run create of a fresh copy of obj.
func createAs(obj client.Object) func(client.Client) error {
	return func(c client.Client) error {
		return c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
	}
}

// leaseEvent is the core Event client-go's leader election records on the
// Lease (resourcelock.LeaseLock.RecordEvent through the record recorder
// controller-runtime gives it), as the recorder builds it.
func leaseEvent(message string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: leaseName + ".18a2b3c4d5e6f708"},
		InvolvedObject: corev1.ObjectReference{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: systemNS,
			Name: leaseName, UID: "5b1d2c3e-0000-4000-8000-000000000001", ResourceVersion: "42"},
		Reason: "LeaderElection", Message: message, Type: corev1.EventTypeNormal, Count: 1,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
		Source: corev1.EventSource{Component: holder}, ReportingController: holder,
	}
}

// wrEvent is an events.k8s.io Event about the WindowsReadiness, as
// winready's recorder builds it.
func wrEvent(note string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default.18a2b3c4d5e6f708"},
		EventTime:  metav1.NowMicro(), ReportingController: "winready", ReportingInstance: "winready-" + strings.Split(holder, "_")[0],
		Action: "Reconcile", Reason: "Progressing", Type: corev1.EventTypeNormal, Note: note,
		Regarding: corev1.ObjectReference{Kind: "WindowsReadiness", APIVersion: "winready.io/v1alpha1", Name: "default",
			UID: "5b1d2c3e-0000-4000-8000-000000000002"},
	}
}

// dryRunSink sends each Event a recorder writes to the API server as the
// manager, in a dry run, and passes on each verdict.
type dryRunSink struct{ verdicts chan error }

func (s dryRunSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	err := manager.Create(ctx, e.DeepCopy(), client.DryRunAll)
	s.verdicts <- err
	return e, err
}
func (s dryRunSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.Create(ctx, e)
}
func (s dryRunSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return s.Create(ctx, e)
}

// coreDryRunSink is dryRunSink for the core v1 recorder leader election uses.
type coreDryRunSink struct{ verdicts chan error }

func (s coreDryRunSink) Create(e *corev1.Event) (*corev1.Event, error) {
	err := manager.Create(ctx, e.DeepCopy(), client.DryRunAll)
	s.verdicts <- err
	return e, err
}
func (s coreDryRunSink) Update(e *corev1.Event) (*corev1.Event, error) { return s.Create(e) }
func (s coreDryRunSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return s.Create(e)
}

var _ = Describe("Bounded writes", func() {
	Describe("the manager's Events", func() {
		It("admits every Event winready emits, as client-go's recorders build them", func() {
			wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "5b1d2c3e-0000-4000-8000-000000000003"}}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-node-0", UID: "5b1d2c3e-0000-4000-8000-000000000004"}}

			By("the reconciler's events.k8s.io Events about the WindowsReadiness, one related to a Node, the longest note it writes")
			verdicts := make(chan error, 8)
			b := events.NewBroadcaster(dryRunSink{verdicts: verdicts})
			bctx, stop := context.WithCancel(ctx)
			DeferCleanup(func() { stop(); b.Shutdown() })
			Expect(b.StartRecordingToSinkWithContext(bctx)).To(Succeed())
			rec := b.NewRecorder(scheme, "winready")
			rec.Eventf(wr, nil, corev1.EventTypeNormal, "Progressing", "Reconcile", "%s", "step 3/6: waiting for calico-node rollout")
			var err error
			Eventually(verdicts).Should(Receive(&err))
			Expect(err).NotTo(HaveOccurred())
			// The controllers cut a note to 1,024 bytes (controllers/bounded.go),
			// on a rune boundary: multi-byte characters count as bytes.
			rec.Eventf(wr, node, corev1.EventTypeWarning, "WindowsNodeNotJoined", "Reconcile", "%s",
				fourByte(255)+"abcd")
			Eventually(verdicts).Should(Receive(&err))
			Expect(err).NotTo(HaveOccurred())

			By("leader election's core Events on the Lease")
			coreVerdicts := make(chan error, 8)
			cb := record.NewBroadcaster()
			DeferCleanup(cb.Shutdown)
			cb.StartRecordingToSink(coreDryRunSink{verdicts: coreVerdicts})
			coreRec := cb.NewRecorder(scheme, corev1.EventSource{Component: holder})
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: leaseName,
				UID: "5b1d2c3e-0000-4000-8000-000000000005", ResourceVersion: "7"}}
			lease.Kind, lease.APIVersion = "Lease", coordinationv1.SchemeGroupVersion.String()
			coreRec.Eventf(lease, corev1.EventTypeNormal, "LeaderElection", "%s", holder+" became leader")
			Eventually(coreVerdicts).Should(Receive(&err))
			Expect(err).NotTo(HaveOccurred())

			By("a repeat, which the core recorder writes as a patch of the Event's count and time")
			ev := leaseEvent(holder + " stopped leading")
			Expect(k8s.Create(ctx, ev)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, ev))).To(Succeed()) })
			repeat := ev.DeepCopy()
			repeat.Count, repeat.LastTimestamp = 2, metav1.Now()
			Expect(manager.Patch(ctx, repeat, client.StrategicMergeFrom(ev), client.DryRunAll)).To(Succeed())
		})

		It("refuses a core Event of 1 MB, and one of 1,200 bytes in 300 characters", func() {
			both("winready-manager-events", createAs(leaseEvent(strings.Repeat("x", 1<<20))))
			both("winready-manager-events", createAs(leaseEvent(fourByte(300))))
		})

		It("refuses an Event about anything but the WindowsReadiness or its Lease", func() {
			other := leaseEvent("became leader")
			other.InvolvedObject = corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: systemNS, Name: "winready-originals"}
			both("winready-manager-events", createAs(other))
			otherLease := leaseEvent("became leader")
			otherLease.InvolvedObject.Name = "kube-controller-manager"
			both("winready-manager-events", createAs(otherLease))
			secret := wrEvent("Reconciled")
			secret.Regarding = corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Namespace: "default", Name: "x"}
			both("winready-manager-events", createAs(secret))
		})

		It("refuses an Event with annotations or labels", func() {
			annotated := wrEvent("Reconciled")
			annotated.Annotations = map[string]string{"a": strings.Repeat("x", 200<<10)}
			both("winready-manager-events", createAs(annotated))
			labelled := leaseEvent("became leader")
			labelled.Labels = map[string]string{"a": "b"}
			both("winready-manager-events", createAs(labelled))
		})

		It("refuses an Event with a long reason or source", func() {
			long := leaseEvent("became leader")
			long.Source.Host = strings.Repeat("h", 64<<10)
			both("winready-manager-events", createAs(long))
		})
	})

	Describe("plans and the record", func() {
		// The record may be created only as a migration begins
		// (winready-manager-record-create): each spec here starts from one,
		// not from whatever state an earlier spec left.
		BeforeEach(func() { inState(migrating) })
		plan := func() *corev1.ConfigMap {
			return &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "winready-probe-plan-node-0",
					Labels: map[string]string{round.ComponentLabel: "probe", round.PlanLabel: "g1-abc-000000"}},
				Data: map[string]string{round.NodeKey: "node-0", round.PlanKey: "{}"},
			}
		}
		record := func() *corev1.ConfigMap {
			return &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "winready-originals",
					Labels: map[string]string{"winready.io/originals": "true", calico.ClaimLabel: "true"}},
				Data: map[string]string{"originals.json": "{}"},
			}
		}

		It("admits winready's own plan", func() {
			Expect(createAs(plan())(manager)).To(Succeed())
		})

		It("refuses a plan of 3,000 four-byte characters (12 KB)", func() {
			p := plan()
			p.Data[round.PlanKey] = fourByte(3000)
			both("winready-probe-plans", createAs(p))
		})

		It("refuses a plan with annotations", func() {
			p := plan()
			p.Annotations = map[string]string{"a": strings.Repeat("x", 200<<10)}
			both("winready-probe-plans", createAs(p))
		})

		It("refuses a record of 20,000 four-byte characters (80 KB)", func() {
			r := record()
			r.Data["originals.json"] = fourByte(20000)
			both("winready-manager-system", createAs(r))
		})

		It("refuses a record with an annotation but winready's description", func() {
			r := record()
			r.Annotations = map[string]string{"winready.io/description": strings.Repeat("x", 200<<10)}
			both("winready-manager-system", createAs(r))
		})
	})

	Describe("the leader-election Lease", func() {
		lease := func(holder string, seconds int32) *coordinationv1.Lease {
			return &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: leaseName},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds,
					AcquireTime: ptr.To(metav1.NowMicro()), RenewTime: ptr.To(metav1.NowMicro()), LeaseTransitions: ptr.To[int32](0)},
			}
		}

		It("admits leader election's Lease, held and released", func() {
			Expect(createAs(lease(holder, 15))(manager)).To(Succeed(), "held, controller-runtime's default duration")
			Expect(createAs(lease("", 1))(manager)).To(Succeed(), "released")

			By("an update keeping what others wrote")
			l := lease(holder, 15)
			l.Labels = map[string]string{"team": "platform"}
			Expect(k8s.Create(ctx, l)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, l))).To(Succeed()) })
			l.Spec.RenewTime = ptr.To(metav1.NowMicro())
			Expect(manager.Update(ctx, l, client.DryRunAll)).To(Succeed())
			l.Labels["team"] = "other"
			Expect(manager.Update(ctx, l, client.DryRunAll)).To(refusedBy("winready-manager-lease"))
		})

		It("refuses a Lease of 2147483647 seconds", func() {
			both("winready-manager-lease", createAs(lease(holder, 2147483647)))
		})

		It("refuses a holder not of leader election's form, another Lease, and labels", func() {
			both("winready-manager-lease", createAs(lease("nobody", 15)))
			both("winready-manager-lease", createAs(lease("winready-manager-7d9f8b6c5d-x2x4z", 15)))
			other := lease(holder, 15)
			other.Name = "other"
			both("winready-manager-lease", createAs(other))
			labelled := lease(holder, 15)
			labelled.Labels = map[string]string{"a": "b"}
			both("winready-manager-lease", createAs(labelled))
		})
	})

	Describe("deletes in the probe namespace", func() {
		// The root CA publisher of kube-controller-manager, absent here, puts
		// kube-root-ca.crt in every namespace.
		BeforeEach(func() {
			ca := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "kube-root-ca.crt"},
				Data: map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"}}
			if err := k8s.Create(ctx, ca); err == nil {
				DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, ca))).To(Succeed()) })
			} else {
				Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
			}
		})

		It("refuses the manager a delete of kube-root-ca.crt, also within a collection", func() {
			byName := client.MatchingFields{"metadata.name": "kube-root-ca.crt"}
			Expect(manager.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(probeNS), byName, client.DryRunAll)).
				To(refusedBy("winready-probe-configmap-delete"))
			Expect(manager.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(probeNS), client.DryRunAll)).
				To(refusedBy("winready-probe-configmap-delete"), "a collection with no selector")
			Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(probeNS), byName, client.DryRunAll)).To(Succeed())
			Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "kube-root-ca.crt"}},
				client.DryRunAll)).To(Succeed())
		})

		It("admits the manager's deletes of a round's plans and reports", func() {
			for _, cm := range []*corev1.ConfigMap{
				{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "winready-probe-plan-node-0",
					Labels: map[string]string{round.ComponentLabel: "probe", round.PlanLabel: "g1-abc-000000"}}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "winready-podcheck-report-node-0",
					Labels: map[string]string{round.ComponentLabel: "podcheck", round.ReportLabel: "g1-abc-000000"}}},
			} {
				Expect(k8s.Create(ctx, cm)).To(Succeed())
				DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, cm))).To(Succeed()) })
			}
			// As internal/round deleteAll asks, per kind and label.
			for _, kind := range []string{"probe", "podcheck"} {
				for _, label := range []string{round.PlanLabel, round.ReportLabel} {
					Expect(manager.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(probeNS),
						client.MatchingLabels{round.ComponentLabel: kind}, client.HasLabels{label}, client.DryRunAll)).To(Succeed())
				}
			}
		})
	})

	Describe("the agents' DaemonSets", func() {
		var image string
		BeforeEach(func() {
			d := &appsv1.Deployment{}
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: systemNS, Name: "winready-manager"}, d)).To(Succeed())
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name == "manager" {
					image = c.Image
				}
			}
			Expect(image).NotTo(BeEmpty())
		})
		daemonSet := func(k round.Kind) *appsv1.DaemonSet {
			return round.DaemonSet(k, probeNS, image, "g1-abc-000000", nil)
		}

		It("admits the probe and the pod network check as winready builds them", func() {
			Expect(createAs(daemonSet(probe.RoundKind))(manager)).To(Succeed())
			Expect(createAs(daemonSet(podcheck.RoundKind))(manager)).To(Succeed())
		})

		// The policy binds every identity in the probe namespace (people and
		// other controllers too): an admin is refused the same.
		DescribeTable("refuses a probe DaemonSet asking for more or elsewhere",
			func(kind round.Kind, mutate func(*corev1.PodSpec)) {
				ds := daemonSet(kind)
				mutate(&ds.Spec.Template.Spec)
				Expect(createAs(ds)(manager)).To(refusedBy("winready-probe-daemonset"))
				Expect(createAs(ds)(k8s)).To(refusedBy("winready-probe-daemonset"))
			},
			Entry("64 CPUs", probe.RoundKind, func(p *corev1.PodSpec) {
				p.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
			}),
			Entry("a GPU", probe.RoundKind, func(p *corev1.PodSpec) {
				p.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
			}),
			Entry("another nodeSelector", probe.RoundKind, func(p *corev1.PodSpec) {
				p.NodeSelector = map[string]string{"kubernetes.io/os": "linux", "gpu": "true"}
			}),
			Entry("other tolerations", probe.RoundKind, func(p *corev1.PodSpec) {
				p.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu"}}
			}),
			Entry("an affinity", probe.RoundKind, func(p *corev1.PodSpec) {
				p.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}}}}}}
			}),
			Entry("a node name", probe.RoundKind, func(p *corev1.PodSpec) { p.NodeName = "node-0" }),
			Entry("another scheduler", probe.RoundKind, func(p *corev1.PodSpec) { p.SchedulerName = "other" }),
			Entry("the pod network check on other nodes", podcheck.RoundKind, func(p *corev1.PodSpec) {
				p.NodeSelector = map[string]string{"kubernetes.io/os": "windows"}
			}),
			Entry("the pod network check with another toleration", podcheck.RoundKind, func(p *corev1.PodSpec) {
				p.Tolerations = nil
			}),
		)
	})
})
