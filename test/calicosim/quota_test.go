package calicosim_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/calicosim"
)

var _ = Describe("the simulated resource quota controller", func() {
	const configMaps = 3
	var namespace string

	// statusWrites counts the quota status writes the controller makes;
	// recounts its recounts (each lists the quotas first).
	var statusWrites, recounts atomic.Int32

	BeforeEach(func() {
		statusWrites.Store(0)
		recounts.Store(0)
		// A namespace of its own: envtest runs no namespace controller, so a
		// deleted one stays Terminating and its name cannot be used again.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "quota-sim-"}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		namespace = ns.Name
		DeferCleanup(func() {
			Expect(k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(namespace))).To(Succeed())
			Expect(k8s.DeleteAllOf(ctx, &corev1.ResourceQuota{}, client.InNamespace(namespace))).To(Succeed())
			Expect(k8s.Delete(ctx, ns)).To(Succeed())
		})
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:  calico.NewScheme(),
			Metrics: metricsserver.Options{BindAddress: "0"},
			NewClient: func(config *rest.Config, options client.Options) (client.Client, error) {
				c, err := client.NewWithWatch(config, options)
				if err != nil {
					return nil, err
				}
				return interceptor.NewClient(c, interceptor.Funcs{
					List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
						if _, ok := list.(*corev1.ResourceQuotaList); ok {
							recounts.Add(1)
						}
						return c.List(ctx, list, opts...)
					},
					SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
						if _, ok := obj.(*corev1.ResourceQuota); ok && sub == "status" {
							statusWrites.Add(1)
						}
						return c.SubResource(sub).Update(ctx, obj, opts...)
					},
				}), nil
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(calicosim.NewResourceQuotas(namespace).SetupWithManager(mgr)).To(Succeed())
		mctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		DeferCleanup(func() {
			cancel()
			Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
		})
	})

	used := func() (int64, error) {
		rq := &corev1.ResourceQuota{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "q"}, rq); err != nil {
			return 0, err
		}
		if _, ok := rq.Status.Hard[corev1.ResourceConfigMaps]; !ok {
			return 0, fmt.Errorf("status.hard is not written yet")
		}
		q := rq.Status.Used[corev1.ResourceConfigMaps]
		return q.Value(), nil
	}
	createConfigMap := func(name string) error {
		return k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
	}

	It("leaves a create to quota admission and releases a delete, as kube-controller-manager's does", func() {
		Expect(createConfigMap("before")).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "q"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceConfigMaps: *resource.NewQuantity(configMaps, resource.DecimalSI)}},
		})).To(Succeed())
		Eventually(used).WithPolling(poll).Should(BeEquivalentTo(1), "a new quota counts what is there")
		Expect(statusWrites.Load()).To(BeEquivalentTo(1))

		By("creating up to the limit: admission adds each create itself")
		for i := range configMaps - 1 {
			Expect(createConfigMap(fmt.Sprintf("cm-%d", i))).To(Succeed())
		}
		Expect(used()).To(BeEquivalentTo(configMaps))
		err := createConfigMap("over")
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "refused by quota admission: %v", err)
		Consistently(statusWrites.Load).WithTimeout(300*time.Millisecond).WithPolling(poll).Should(BeEquivalentTo(1),
			"a create is not recounted: a count from the cache then could take it back")

		By("deleting one: the controller releases it, and a create fits again")
		Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "before"}})).To(Succeed())
		Eventually(used).WithPolling(poll).Should(BeEquivalentTo(configMaps - 1))
		Expect(statusWrites.Load()).To(BeEquivalentTo(2))
		Expect(createConfigMap("after")).To(Succeed())
		Expect(used()).To(BeEquivalentTo(configMaps))
	})

	It("recounts on an update only where kube-controller-manager's update filter does: a Service changing type", func() {
		Expect(k8s.Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "q"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
				corev1.ResourceConfigMaps:        *resource.NewQuantity(configMaps, resource.DecimalSI),
				corev1.ResourceServicesNodePorts: *resource.NewQuantity(2, resource.DecimalSI),
			}},
		})).To(Succeed())
		Eventually(used).WithPolling(poll).Should(BeEquivalentTo(0))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "updated"}}
		Expect(k8s.Create(ctx, cm)).To(Succeed())
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "updated"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, svc))).To(Succeed()) })
		before := recounts.Load()

		cm.Data = map[string]string{"k": "v"}
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		svc.Labels = map[string]string{"example.com/touched": "yes"}
		Expect(k8s.Update(ctx, svc)).To(Succeed())
		Consistently(recounts.Load).WithTimeout(300*time.Millisecond).WithPolling(poll).Should(Equal(before),
			"a ConfigMap's data and a Service's labels change nothing a quota counts")

		svc.Spec.Type = corev1.ServiceTypeNodePort
		Expect(k8s.Update(ctx, svc)).To(Succeed())
		Eventually(recounts.Load).WithPolling(poll).Should(BeNumerically(">", before), "a NodePort counts for services.nodeports")
	})
})
