package passes_test

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/record"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

// The manager's token may write the WindowsReadiness status, and may create
// the record of the originals while no WindowsReadiness exists: neither may
// stand in for what winready saw of the cluster itself.
var _ = Describe("What winready does not take from its own status or a record it did not write", func() {
	var (
		b        *inlineBed
		original look.Touched
	)

	BeforeEach(func() {
		b = driveInline(calicosim.MainCluster())
		original = b.on.Touched()
	})

	// forgeStatus writes into the status as anyone holding the manager's
	// token can.
	forgeStatus := func(mutate func(*v1alpha1.WindowsReadinessStatus)) {
		GinkgoHelper()
		wr := b.on.WR()
		base := wr.DeepCopy()
		mutate(&wr.Status)
		Expect(b.k8s.Status().Patch(ctx, wr, client.MergeFrom(base))).To(Succeed())
	}
	probeFailed := look.HaveStatus(metav1.ConditionTrue, conditions.ReasonNetworkProbeFailed)

	It("probes again rather than taking a passed probe round written into its status", func() {
		b.agents.Silence("linux-2")
		b.on.CreateWR()
		reconcileUntil(b, b.on.Condition(conditions.Stalled), probeFailed)
		failed := b.on.WR().Status.Preflight.Probe.Round

		forgeStatus(func(st *v1alpha1.WindowsReadinessStatus) {
			p := st.Preflight.Probe
			p.MissingReports, p.FirstMissing, p.MissingReasons = 0, nil, nil
			p.FailingPairs, p.FirstFailing, p.PassedPairs = 0, nil, p.PlannedPairs
			st.Phase = v1alpha1.PhaseReady
		})
		reconcileUntil(b, func() string { return b.on.WR().Status.Preflight.Probe.Round }, Not(Equal(failed)),
			"the round in the status is not one this manager judged as it reads now: it probes again")
		reconcileUntil(b, b.on.Condition(conditions.Stalled), probeFailed)
		Expect(b.on.Touched()).To(Equal(original), "nothing changed on a forged verdict")
		Expect(b.originalsRecord()).To(BeNil(), "nothing recorded before the first change")
	})

	It("stops before any change when the status shows originals no record holds, and records the cluster once a person clears them", func() {
		b.on.CreateWR()
		forgeStatus(func(st *v1alpha1.WindowsReadinessStatus) {
			st.Phase = v1alpha1.PhaseReady
			st.Originals = &v1alpha1.Originals{RecordedAt: metav1.NewTime(time.Now().Truncate(time.Second)),
				BGP:                v1alpha1.OriginalValue{Present: true, Value: "Disabled"},
				NodeMaxUnavailable: &v1alpha1.OriginalValue{Present: true, Value: "100%"}}
		})
		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonForeignRecord))
		recorded := b.on.Condition(conditions.OriginalsRecorded)()
		Expect(recorded).To(look.HaveStatus(metav1.ConditionFalse, conditions.ReasonForeignRecord))
		Expect(recorded.Message).To(And(ContainSubstring("status.originals"), ContainSubstring("bgp Disabled"),
			ContainSubstring("maxUnavailable 100%"), ContainSubstring("ForeignRecord"), ContainSubstring("--subresource=status")),
			"the condition names the values and both ways on")
		b.rest(time.Hour)
		Expect(b.on.Touched()).To(Equal(original), "nothing changed")
		Expect(b.originalsRecord()).To(BeNil(), "the status's originals never become the record unacknowledged")
		Expect(b.on.WR().Status.Preflight).To(BeNil(), "not even the preflight runs")

		forgeStatus(func(st *v1alpha1.WindowsReadinessStatus) { st.Originals = nil })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.loadRecord().Originals.BGP).To(Equal(v1alpha1.OriginalValue{Present: true, Value: "Enabled"}),
			"recorded from the cluster before the first change")
	})

	It("goes on from originals an earlier winready kept in its status alone, once acknowledged, and rolls back to them", func() {
		b.on.CreateWR()
		reconcileUntil(b, func() v1alpha1.StepState { return b.on.Step(v1alpha1.StepBGP)().State }, Equal(v1alpha1.StepCompleted))
		kept := b.on.WR().Status.Originals.DeepCopy()
		By("an upgrade from a winready that wrote no record, in the middle of the migration")
		Expect(b.k8s.Delete(ctx, b.originalsRecord())).To(Succeed())
		b.restart()
		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonForeignRecord))
		Expect(b.on.WR().Status.Originals).To(Equal(kept), "the originals stay on show until a person decides")
		Expect(b.on.WR().Spec.Direction).NotTo(Equal(v1alpha1.DirectionRollback))

		b.acknowledgeRecord()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		rec := b.loadRecord()
		Expect(rec.WrittenBy(b.on.WR().UID)).To(BeTrue(), "acknowledged, they are this WindowsReadiness's record")
		Expect(rec.Originals.RecordedAt).To(Equal(kept.RecordedAt), "the record holds what the status showed")
		Expect(b.on.Condition(conditions.OriginalsRecorded)()).To(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonRestoredFromRecord))

		b.on.UpdateWR(func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Direction = v1alpha1.DirectionRollback })
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseRolledBack))
		Expect(b.on.Touched()).To(Equal(original), "rolled back to the values before the first change")
		Expect(b.originalsRecord()).To(BeNil())
	})

	It("stops before any change on a record planted before the WindowsReadiness, and goes on from it once acknowledged", func() {
		planted := &v1alpha1.Originals{RecordedAt: metav1.NewTime(time.Now().Truncate(time.Second)),
			BGP:                v1alpha1.OriginalValue{Present: true, Value: "Enabled"},
			NodeMaxUnavailable: &v1alpha1.OriginalValue{Present: true, Value: "100%"},
			NodeIgnored:        &v1alpha1.OriginalValue{},
			ServicesEndpoint: v1alpha1.OriginalConfigMap{NodeEnv: &v1alpha1.ServiceEndpointEnv{
				Host: "10.96.0.1", Port: "443"}},
		}
		for _, p := range b.on.Installation().Spec.CalicoNetwork.IPPools {
			planted.Pools = append(planted.Pools, v1alpha1.OriginalPool{Name: p.Name, CIDR: p.CIDR, Encapsulation: "None"})
		}
		data, err := json.Marshal(planted)
		Expect(err).NotTo(HaveOccurred())
		Expect(b.k8s.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: record.Name, Labels: map[string]string{record.Label: "true"}},
			Data:       map[string]string{"originals.json": string(data)},
		})).To(Succeed())

		b.on.CreateWR()
		reconcileUntil(b, b.on.Condition(conditions.Stalled), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonForeignRecord))
		recorded := b.on.Condition(conditions.OriginalsRecorded)()
		Expect(recorded).To(look.HaveStatus(metav1.ConditionFalse, conditions.ReasonForeignRecord))
		Expect(recorded.Message).To(And(ContainSubstring("winready-system/winready-originals"),
			ContainSubstring("encapsulation None"), ContainSubstring("maxUnavailable 100%"), ContainSubstring("ForeignRecord")),
			"the condition names the record and what it holds")
		b.rest(time.Hour)
		Expect(b.on.Touched()).To(Equal(original), "nothing changed")
		Expect(b.on.WR().Status.Preflight).To(BeNil(), "not even the preflight runs on a foreign record")
		Expect(b.on.WR().Status.Originals).To(BeNil(), "the status does not show a foreign record's values as the originals")

		b.acknowledgeRecord()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.WR().Status.Originals.NodeMaxUnavailable).To(HaveValue(Equal(v1alpha1.OriginalValue{Present: true, Value: "100%"})),
			"a person accepted the record's values")
		Expect(b.on.Condition(conditions.OriginalsRecorded)()).To(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonRestoredFromRecord))
	})

	It("goes on from the record it wrote itself after a restart, with no acknowledgement", func() {
		b.on.CreateWR()
		reconcileUntil(b, func() v1alpha1.StepState { return b.on.Step(v1alpha1.StepBGP)().State }, Equal(v1alpha1.StepCompleted))
		Expect(b.loadRecord().WrittenBy(b.on.WR().UID)).To(BeTrue(), "the record names the WindowsReadiness that wrote it")

		b.restart()
		reconcileUntil(b, b.on.Phase, Equal(v1alpha1.PhaseReady))
		Expect(b.on.Condition(conditions.OriginalsRecorded)()).To(look.HaveStatus(metav1.ConditionTrue, conditions.ReasonRecorded))
		Expect(b.events.count("Warning " + conditions.ReasonOriginalsUnsafe)).To(BeZero())
		Expect(b.on.WR().Status.Originals.BGP).To(Equal(v1alpha1.OriginalValue{Present: true, Value: "Enabled"}))
	})
})

// loadRecord is the record of the originals as winready reads it.
func (b *inlineBed) loadRecord() *record.Record {
	GinkgoHelper()
	rec, err := record.Load(ctx, b.k8s, operatorNamespace)
	Expect(err).NotTo(HaveOccurred())
	Expect(rec).NotTo(BeNil())
	return rec
}
