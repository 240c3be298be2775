package passes_test

import (
	"context"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var _ = Describe("The bed's mirror", func() {
	It("reads back, after a DeleteAllOf, only the objects it selected", func() {
		api, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		var gets atomic.Int32
		m := newMirror(interceptor.NewClient(api, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				gets.Add(1)
				return c.Get(ctx, key, obj, opts...)
			},
		}))
		cm := func(name, group string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: name,
				Labels: map[string]string{"example.com/group": group}}}
		}
		for _, obj := range []*corev1.ConfigMap{cm("mirror-a", "gone"), cm("mirror-b", "gone"), cm("mirror-c", "kept")} {
			Expect(m.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(api.Delete(ctx, obj))).To(Succeed()) })
		}
		// Memory holds every ConfigMap of the cluster, kube-system's too.
		all := &corev1.ConfigMapList{}
		Expect(m.List(ctx, all)).To(Succeed())
		Expect(len(all.Items)).To(BeNumerically(">", 3))
		_, seen := m.Changes(0)

		gets.Store(0)
		Expect(m.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(probeNamespace),
			client.MatchingLabels{"example.com/group": "gone"})).To(Succeed())
		Expect(gets.Load()).To(BeEquivalentTo(2), "the two it deleted are read back, and nothing else")
		for name, gone := range map[string]bool{"mirror-a": true, "mirror-b": true, "mirror-c": false} {
			err := m.Get(ctx, client.ObjectKey{Namespace: probeNamespace, Name: name}, &corev1.ConfigMap{})
			Expect(apierrors.IsNotFound(err)).To(Equal(gone), "%s in memory: %v", name, err)
		}
		deleted, _ := m.Changes(seen)
		Expect(deleted).To(HaveLen(2))
		for _, c := range deleted {
			Expect(c.New).To(BeNil(), "a deletion is recorded")
		}
	})
})
