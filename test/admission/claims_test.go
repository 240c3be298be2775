package admission_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// With no WindowsReadiness in the cluster nothing is under way, and the
// manager's token writes none of the objects it may write while one
// exists: claimed, a write needs the WindowsReadiness (a binding's required
// parameter); unclaimed, the parameterless policy of the object refuses it.
// An admin's write of the unclaimed object is admitted all along.
var _ = Describe("With no WindowsReadiness, the manager's token", func() {
	BeforeEach(func() { inState(noWindowsReadiness) })

	// refusedEitherWay tries write as the manager claimed and unclaimed, and
	// as an admin unclaimed.
	refusedEitherWay := func(write func(c client.Client, claim bool) error, claimedBy, unclaimedBy string) {
		GinkgoHelper()
		Eventually(func() error { return write(manager, true) }).Should(refusedBy(claimedBy), "claimed")
		Expect(write(manager, false)).To(refusedBy(unclaimedBy), "unclaimed")
		Expect(write(k8s, false)).To(Succeed(), "an admin")
	}

	DescribeTable("changes nothing in the Installation (item 2, and the pools, BGP and the Windows dataplane)",
		func(change func(*operatorv1.Installation)) {
			inst := setInstallation()
			refusedEitherWay(func(c client.Client, claim bool) error {
				changed := inst.DeepCopy()
				change(changed)
				if claim {
					claimed(changed)
				}
				return c.Patch(ctx, changed, client.MergeFrom(inst), client.DryRunAll)
			}, specPolicy, installationPolicy)
		},
		Entry("maxUnavailable 50, a count the CRD's bound admits", speed(intstr.FromInt32(50))),
		Entry("a pool's encapsulation None", encapsulation(operatorv1.EncapsulationNone)),
		Entry("BGP off", bgp(operatorv1.BGPDisabled)),
		Entry("the Windows dataplane HNS", windowsDataplane(operatorv1.WindowsDataplaneHNS)),
		Entry("serviceCIDRs", serviceCIDRs("10.96.0.0/12")),
	)

	It("writes no API server address for Calico (item 1)", func() {
		refusedEitherWay(func(c client.Client, claim bool) error {
			cm := servicesEndpoint(map[string]string{"KUBERNETES_SERVICE_HOST": "192.0.2.1", "KUBERNETES_SERVICE_PORT": "6443"})
			if claim {
				claimed(cm)
			}
			return c.Create(ctx, cm, client.DryRunAll)
		}, endpointSpecPolicy, endpointPolicy)
	})

	It("cannot freeze calico-node (item 7)", func() {
		ds := calicoNode()
		refusedEitherWay(func(c client.Client, claim bool) error {
			held := ds.DeepCopy()
			if claim {
				claimed(held)
			}
			held.Annotations = map[string]string{calico.IgnoreAnnotation: "true"}
			return c.Patch(ctx, held, client.MergeFrom(ds), client.DryRunAll, client.FieldOwner("winready"))
		}, holdPolicy, "winready-manager-calico-node")
	})

	It("neither plants a record nor deletes one (item 6)", func() {
		rec := func() *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "winready-originals",
				Labels: map[string]string{"winready.io/originals": "true"}},
				Data: map[string]string{"originals.json": `{"nodeMaxUnavailable":{"present":true,"value":"100%"}}`}}
		}
		refusedEitherWay(func(c client.Client, claim bool) error {
			r := rec()
			if claim {
				claimed(r)
			}
			return c.Create(ctx, r, client.DryRunAll)
		}, "winready-manager-record-create", "winready-manager-system")

		By("a record a migration left, its WindowsReadiness gone")
		kept := rec()
		Expect(k8s.Create(ctx, kept)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, rec()))).To(Succeed()) })
		Expect(manager.Delete(ctx, kept, client.DryRunAll)).To(refusedBy("winready-manager-system"), "unclaimed")
		By("claimed by the token first: the delete still needs the WindowsReadiness")
		Expect(manager.Patch(ctx, claimed(kept.DeepCopy()), client.MergeFrom(kept))).To(Succeed())
		Eventually(func() error { return manager.Delete(ctx, rec(), client.DryRunAll) }).
			Should(refusedBy("winready-manager-record"))
		By("a person lifts the claim, and deletes the record as they like")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(kept), kept)).To(Succeed())
		Expect(calico.Unclaim(ctx, k8s, kept)).To(Succeed())
		Expect(k8s.Delete(ctx, kept, client.DryRunAll)).To(Succeed())
	})
})

var _ = Describe("WindowsReadiness default under the manager's token", func() {
	finalizerPatch := func(wr *v1alpha1.WindowsReadiness, change func(*v1alpha1.WindowsReadiness)) error {
		changed := wr.DeepCopy()
		change(changed)
		return manager.Patch(ctx, changed, client.MergeFrom(wr), client.DryRunAll)
	}
	current := func() *v1alpha1.WindowsReadiness {
		wr := &v1alpha1.WindowsReadiness{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr)).To(Succeed())
		return wr
	}

	It("carries winready's finalizer, and nothing else of the manager's", func() {
		inState(migrating)
		wr := current()
		Eventually(func() error {
			return finalizerPatch(wr, func(w *v1alpha1.WindowsReadiness) { controllerutil.AddFinalizer(w, calico.ClaimFinalizer) })
		}).Should(Succeed(), "the finalizer added")
		refused := map[string]func(*v1alpha1.WindowsReadiness){
			"paused":      func(w *v1alpha1.WindowsReadiness) { w.Spec.Paused = true },
			"gate lifted": func(w *v1alpha1.WindowsReadiness) { w.Spec.WindowsNodeGate = v1alpha1.GateDisabled },
			"labelled":    func(w *v1alpha1.WindowsReadiness) { w.Labels = map[string]string{"example.com/x": "y"} },
			"another finalizer": func(w *v1alpha1.WindowsReadiness) {
				controllerutil.AddFinalizer(w, "example.com/forever")
			},
		}
		for what, change := range refused {
			Expect(finalizerPatch(wr, change)).To(refusedBy("winready-manager-windowsreadiness"), what)
		}
		Expect(manager.Delete(ctx, wr, client.DryRunAll)).To(HaveOccurred(), "no delete")

		By("while it exists, the finalizer stays")
		controllerutil.AddFinalizer(wr, calico.ClaimFinalizer)
		Expect(k8s.Update(ctx, wr)).To(Succeed())
		wr = current()
		remove := func(w *v1alpha1.WindowsReadiness) { controllerutil.RemoveFinalizer(w, calico.ClaimFinalizer) }
		Expect(finalizerPatch(wr, remove)).To(refusedBy("winready-manager-windowsreadiness"))

		By("deleted, it goes once winready removes it")
		Expect(k8s.Delete(ctx, wr)).To(Succeed())
		wr = current()
		Expect(wr.DeletionTimestamp).NotTo(BeNil())
		Expect(finalizerPatch(wr, remove)).To(Succeed())
		noWR()
	})
})

// The claimed objects' writes need WindowsReadiness default whoever writes
// them: the Tigera operator's and people's too, which the policies' own
// conditions admit while it exists. That is what the finalizer is for.
var _ = Describe("A claimed object", func() {
	It("takes everyone's writes while WindowsReadiness default exists", func() {
		inState(migrating)
		inst := setInstallation()
		claimedInst := claimed(inst.DeepCopy())
		Expect(k8s.Patch(ctx, claimedInst, client.MergeFrom(inst))).To(Succeed())
		DeferCleanup(unclaimAll)
		operator := claimedInst.DeepCopy()
		operator.Spec.Variant = operatorv1.Calico
		Expect(k8s.Patch(ctx, operator, client.MergeFrom(claimedInst), client.DryRunAll)).To(Succeed(), "an admin, or the Tigera operator")
		ds := calicoNode()
		held := claimed(ds.DeepCopy())
		Expect(k8s.Patch(ctx, held, client.MergeFrom(ds))).To(Succeed())
		rolled := held.DeepCopy()
		rolled.Spec.Template.Spec.Containers[0].Image = "calico/node:v3.32.1"
		Expect(k8s.Patch(ctx, rolled, client.MergeFrom(held), client.DryRunAll)).To(Succeed(), "the Tigera operator's render")
	})
})
