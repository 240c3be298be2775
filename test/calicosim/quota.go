package calicosim

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ResourceQuotas plays kube-controller-manager's resource quota controller
// for the object counts a quota of the probe namespace holds: it writes each
// quota's status.hard from its spec and status.used from the objects there,
// whenever one of them changes. The API server's quota admission enforces a
// quota only once its status is written, and adds each create to
// status.used itself; this controller releases what is deleted, a moment
// later, as the real one does.
type ResourceQuotas struct {
	// Namespace is the namespace whose quotas are kept.
	Namespace string

	client client.Client
	reader client.Reader
}

// NewResourceQuotas returns the quota controller for namespace.
func NewResourceQuotas(namespace string) *ResourceQuotas {
	return &ResourceQuotas{Namespace: namespace}
}

// SetupWithManager registers the controller on mgr: the quotas and the
// objects they count wake it.
func (q *ResourceQuotas) SetupWithManager(mgr ctrl.Manager) error {
	// Counted past the cache: the API server's quota admission adds each
	// create to status.used before the new object reaches a cache, and a
	// count from the cache would take it back until the object arrives.
	q.client, q.reader = mgr.GetClient(), mgr.GetAPIReader()
	quotas := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetNamespace() != q.Namespace {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: q.Namespace}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-resourcequotas").
		WithOptions(controllerOptions()).
		Watches(&corev1.ResourceQuota{}, quotas).
		Watches(&appsv1.DaemonSet{}, quotas).
		Watches(&corev1.ConfigMap{}, quotas).
		Watches(&corev1.Service{}, quotas).
		Complete(q)
}

// Reconcile recounts every quota of the namespace.
func (q *ResourceQuotas) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	list := &corev1.ResourceQuotaList{}
	if err := q.reader.List(ctx, list, client.InNamespace(q.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	var services *corev1.ServiceList // listed once for the three kinds of service count
	for i := range list.Items {
		rq := &list.Items[i]
		used := corev1.ResourceList{}
		for name := range rq.Spec.Hard {
			n, err := q.count(ctx, name, &services)
			if err != nil {
				return ctrl.Result{}, err
			}
			used[name] = *resource.NewQuantity(n, resource.DecimalSI)
		}
		if equality.Semantic.DeepEqual(rq.Status.Hard, rq.Spec.Hard) && equality.Semantic.DeepEqual(rq.Status.Used, used) {
			continue
		}
		rq.Status.Hard, rq.Status.Used = rq.Spec.Hard, used
		// A conflict is quota admission adding a create: count again.
		if err := q.client.Status().Update(ctx, rq); apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		} else if err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// count is the usage of one quota resource in the namespace.
func (q *ResourceQuotas) count(ctx context.Context, name corev1.ResourceName, services **corev1.ServiceList) (int64, error) {
	in := client.InNamespace(q.Namespace)
	switch name {
	case "count/daemonsets.apps":
		l := &appsv1.DaemonSetList{}
		err := q.reader.List(ctx, l, in)
		return int64(len(l.Items)), err
	case corev1.ResourceConfigMaps, "count/configmaps":
		l := &corev1.ConfigMapList{}
		err := q.reader.List(ctx, l, in)
		return int64(len(l.Items)), err
	case corev1.ResourceServices, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers, "count/services":
		if *services == nil {
			l := &corev1.ServiceList{}
			if err := q.reader.List(ctx, l, in); err != nil {
				return 0, err
			}
			*services = l
		}
		var n int64
		for _, s := range (*services).Items {
			switch name {
			case corev1.ResourceServicesLoadBalancers:
				if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
					n++
				}
			case corev1.ResourceServicesNodePorts:
				if s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer {
					n += int64(len(s.Spec.Ports))
				}
			default:
				n++
			}
		}
		return n, nil
	}
	return 0, fmt.Errorf("calicosim: quota resource %s is not simulated", name)
}
