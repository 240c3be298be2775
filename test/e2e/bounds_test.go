package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readiness is an answer of the manager's /readyz.
type readiness struct {
	Code int
	Body string
}

// managerReadyz is the manager's readiness answer on the probe address of
// its Deployment (config/manager), code 0 while nothing answers.
func managerReadyz() readiness {
	GinkgoHelper()
	resp, err := http.Get("http://127.0.0.1:8081/readyz")
	if err != nil {
		return readiness{}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return readiness{Code: resp.StatusCode, Body: string(body)}
}

var _ = Describe("winready's admission policies before its first write", Ordered, func() {
	// The binding Helm and a GitOps tool may create last.
	const last = "winready-windows-node-gate-calico"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "winready-system", Name: "winready.winready.io"}}

	BeforeAll(func() {
		Expect(winready.Stop()).To(Succeed())
		DeferCleanup(func() { runTodayAsInstalled("winready-after-bounds-scenario") })
	})

	It("waits, writing nothing, until the last binding exists, and writes its Lease after it", func() {
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: last}, binding)).To(Succeed())
		Expect(k8s.Delete(ctx, binding)).To(Succeed())
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, lease))).To(Succeed())

		running, err := runAsInstalled(ctx, k8s, cfg, manager, "winready-before-policies", winreadyBin())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(running.Stop)
		Eventually(managerReadyz).Should(And(HaveField("Code", http.StatusServiceUnavailable),
			HaveField("Body", ContainSubstring("binding "+last))), "the manager names the binding it waits for")
		// The manager makes its first write, the leader election's Lease,
		// only once the wait ends; it has not ended.
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(lease), lease))).To(BeTrue(),
			"the manager wrote its Lease before the binding existed")

		restored := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{
			Name: binding.Name, Labels: binding.Labels, Annotations: binding.Annotations}, Spec: binding.Spec}
		Expect(k8s.Create(ctx, restored)).To(Succeed())
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(lease), lease) }).Should(Succeed())
		Eventually(managerReadyz).Should(HaveField("Code", http.StatusOK))
		// One etcd orders every write by its revision, which the API server
		// hands out as resourceVersion: the Lease came after the binding.
		Expect(revision(lease)).To(BeNumerically(">", revision(restored)), "the Lease was written after the binding")
	})
})

// revision is the etcd revision an object was last written at.
func revision(obj client.Object) uint64 {
	GinkgoHelper()
	rv, err := strconv.ParseUint(strings.TrimSpace(obj.GetResourceVersion()), 10, 64)
	Expect(err).NotTo(HaveOccurred())
	return rv
}
