package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/kit"
	"github.com/winready/winready/test/kit/look"
)

var _ = Describe("A cluster where projectcalico.org/v3 is not served", Ordered, func() {
	// A control plane of its own, one for the specs here: only the
	// operator.tigera.io CRDs, as in a cluster with crd.projectcalico.org/v1
	// and no Calico API server. Each spec leaves it as it found it.
	var (
		restCfg *rest.Config
		c       client.Client
	)
	BeforeAll(func() {
		env, err := kit.Environment(kit.Options{CalicoCRDs: calicoCRDs, CalicoCRDSet: kit.OperatorCRDsOnly})
		Expect(err).NotTo(HaveOccurred())
		restCfg, err = env.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		c, err = client.New(restCfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
	})
	// run starts winready on the cluster with inst and a WindowsReadiness;
	// the spec's clean-up stops it and removes what the spec made.
	run := func(inst *operatorv1.Installation, more ...client.Object) *operator {
		objs := append(more, inst)
		for _, obj := range objs {
			Expect(c.Create(ctx, obj)).To(Succeed())
		}
		op := startOperatorOn(restCfg, nil, nil)
		DeferCleanup(func() {
			op.stop()
			Expect(kit.ForgetWindowsReadiness(ctx, c, operatorNamespace)).To(Succeed())
			for _, obj := range objs {
				Expect(client.IgnoreNotFound(c.Delete(ctx, obj))).To(Succeed())
			}
		})
		Expect(c.Create(ctx, &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}})).To(Succeed())
		return op
	}

	It("is refused with the fix in the message, and nothing is changed", long, func() {
		inst := &operatorv1.Installation{
			ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName},
			Spec: operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{
				BGP: ptr.To(operatorv1.BGPEnabled),
				IPPools: []operatorv1.IPPool{{Name: "default-ipv4-ippool", CIDR: "172.20.0.0/16",
					Encapsulation: operatorv1.EncapsulationVXLANCrossSubnet, BlockSize: ptr.To[int32](26)}},
			}},
		}
		op := run(inst)

		wr := &v1alpha1.WindowsReadiness{}
		stalled := func() metav1.ConditionStatus {
			Expect(c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr)).To(Succeed())
			for _, cond := range wr.Status.Conditions {
				if cond.Type == conditions.Stalled && cond.Reason == conditions.ReasonCalicoAPIUnavailable {
					return cond.Status
				}
			}
			return ""
		}
		Eventually(stalled).Should(Equal(metav1.ConditionTrue))
		Expect(wr.Status.Phase).To(Equal(v1alpha1.PhaseStalled))
		Expect(wr.Status.Message).To(ContainSubstring("projectcalico.org/v3 is not served"))
		Expect(wr.Status.Message).To(ContainSubstring("Install the Calico API server"))
		Expect(wr.Status.Originals).To(BeNil())
		Expect(look.CalicoWrites(op.writes.Snapshot())).To(BeEmpty())
		after := &operatorv1.Installation{}
		Expect(c.Get(ctx, client.ObjectKeyFromObject(inst), after)).To(Succeed())
		Expect(after.Generation).To(Equal(inst.Generation), "the Installation is untouched")
	})

	It("says the Calico API server is down, in its APIService's words, while projectcalico.org/v3 answers 503", long, func() {
		// projectcalico.org/v3 is an aggregated API server that is not
		// running.
		apiService := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": "v3.projectcalico.org"},
			"spec": map[string]any{"group": "projectcalico.org", "version": "v3", "groupPriorityMinimum": int64(1500),
				"versionPriority": int64(200), "insecureSkipTLSVerify": true,
				"service": map[string]any{"namespace": "calico-apiserver", "name": "calico-api", "port": int64(443)}},
		}}
		inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName},
			Spec: operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)}}}
		op := run(inst, apiService)

		reconciling := func() metav1.Condition {
			wr := &v1alpha1.WindowsReadiness{}
			Expect(c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr)).To(Succeed())
			for _, cond := range wr.Status.Conditions {
				if cond.Type == conditions.Reconciling {
					return cond
				}
			}
			return metav1.Condition{}
		}
		Eventually(reconciling).Should(And(HaveField("Reason", conditions.ReasonCalicoAPIServerUnavailable),
			HaveField("Message", ContainSubstring("the Calico API server is unavailable: APIService v3.projectcalico.org is not Available (ServiceNotFound")),
			HaveField("Message", ContainSubstring("Check TigeraStatus apiserver"))))
		Expect(look.CalicoWrites(op.writes.Snapshot())).To(BeEmpty())
	})
})
