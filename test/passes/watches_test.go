package passes_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit/look"
)

// The bed wakes winready through the manager's watches and predicates
// (controllers.Watches), so a predicate that drops an event a step waits for
// stalls a spec here as it would stall winready in a cluster.
var _ = Describe("Waking winready through the manager's watches", func() {
	It("lets a deleted WindowsReadiness go only through the watch that passes its deletion", func() {
		b := driveInline(calicosim.MainCluster())
		on.CreateWR()
		reconcileUntil(b, on.Condition(conditions.Ready), look.HaveStatus(metav1.ConditionTrue, conditions.ReasonMigrated))
		b.rest(time.Hour)
		Expect(b.result.RequeueAfter).To(BeZero(), "winready asks for no other look at a Ready cluster")

		// A WindowsReadiness watch that misses the update marking it for
		// deletion: nothing wakes winready to lift its finalizer.
		b.watches = newWatches(withoutUpdates(controllers.Watches(), &v1alpha1.WindowsReadiness{}))
		wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
		Expect(k8s.Delete(ctx, wr)).To(Succeed())
		gone := func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(wr), wr)) }
		passes := b.passes
		failures := InterceptGomegaFailures(func() { reconcileUntil(b, gone, BeTrue(), "winready removes its finalizer") })
		Expect(failures).To(ConsistOf(ContainSubstring("nothing wakes winready any more")), "the deletion wakes no pass")
		Expect(b.passes).To(Equal(passes), "no pass ran")

		// The manager's own watch passes the same update, and winready lets
		// the WindowsReadiness go.
		b.watches = newWatches(controllers.Watches())
		reconcileUntil(b, gone, BeTrue(), "winready removes its finalizer")
	})

	It("wakes winready for an event of a watched kind the cache holds, and for no other write", func() {
		b := driveInline(calicosim.MainCluster())
		b.rest(time.Hour)
		Expect(b.woken()).To(BeFalse(), "at rest")
		create := func(obj client.Object) {
			GinkgoHelper()
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed()) })
		}
		pod := func(name string, labels map[string]string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: calico.SystemNamespace, Name: name, Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		}

		create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "unwatched"}})
		Expect(b.woken()).To(BeFalse(), "a kind no watch covers")
		create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "not-the-services-endpoint"}})
		create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: "no-report"}})
		create(pod("not-calico-node", map[string]string{controllers.CalicoNodePodLabel: "other"}))
		Expect(b.woken()).To(BeFalse(), "objects of watched kinds the cache does not select")

		create(pod("calico-node-extra", map[string]string{controllers.CalicoNodePodLabel: controllers.CalicoNodePodLabelValue}))
		Expect(b.woken()).To(BeTrue(), "a calico-node pod the cache selects")
	})
})
