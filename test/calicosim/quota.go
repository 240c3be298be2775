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
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ResourceQuotas plays kube-controller-manager's resource quota controller
// for the object counts a quota of the probe namespace holds: it writes each
// quota's status.hard from its spec and status.used from the objects there.
// The API server's quota admission enforces a quota only once its status is
// written, and adds each create to status.used itself; this controller
// releases what is deleted, a moment later, as the real one does.
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

// SetupWithManager registers the controller on mgr. As the real one, it
// counts from its informers (the manager's cache) and recounts when a quota
// is created or its spec.hard changes, when a counted object is deleted, and
// on the one update of a counted kind that kube-controller-manager's update
// filter passes (pkg/quota/v1/install/update_filter.go): a Service whose
// type changes what it counts for. Not on a create, which quota admission
// has added to status.used already, nor on that status write: a recount then
// would read a cache the new object may not have reached yet, and take the
// create back.
func (q *ResourceQuotas) SetupWithManager(mgr ctrl.Manager) error {
	q.client, q.reader = mgr.GetClient(), mgr.GetClient()
	quotas := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetNamespace() != q.Namespace {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: q.Namespace}}}
	})
	hardChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !equality.Semantic.DeepEqual(e.ObjectOld.(*corev1.ResourceQuota).Spec.Hard, e.ObjectNew.(*corev1.ResourceQuota).Spec.Hard)
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
	released := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(event.UpdateEvent) bool { return false },
	}
	serviceReleased := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return quotaServiceType(e.ObjectOld.(*corev1.Service)) != quotaServiceType(e.ObjectNew.(*corev1.Service))
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-resourcequotas").
		WithOptions(controllerOptions()).
		Watches(&corev1.ResourceQuota{}, quotas, builder.WithPredicates(hardChanged)).
		Watches(&appsv1.DaemonSet{}, quotas, builder.WithPredicates(released)).
		Watches(&corev1.ConfigMap{}, quotas, builder.WithPredicates(released)).
		Watches(&corev1.Service{}, quotas, builder.WithPredicates(serviceReleased)).
		Complete(q)
}

// quotaServiceType is what a Service counts for beyond services, as
// kube-controller-manager's GetQuotaServiceType says: a NodePort, a
// LoadBalancer, or nothing more.
func quotaServiceType(s *corev1.Service) corev1.ServiceType {
	switch s.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return s.Spec.Type
	}
	return ""
}

// Reconcile recounts every quota of the namespace.
func (q *ResourceQuotas) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	list := &corev1.ResourceQuotaList{}
	if err := q.reader.List(ctx, list, client.InNamespace(q.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	c := counter{reader: q.reader, namespace: q.Namespace}
	for i := range list.Items {
		rq := &list.Items[i]
		used := corev1.ResourceList{}
		for name := range rq.Spec.Hard {
			n, err := c.count(ctx, name)
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

// counter counts the objects of a namespace for one recount, listing the
// Services once for the three kinds of service count.
type counter struct {
	reader    client.Reader
	namespace string
	services  *corev1.ServiceList
}

// count is the usage of one quota resource in the namespace.
func (c *counter) count(ctx context.Context, name corev1.ResourceName) (int64, error) {
	in := client.InNamespace(c.namespace)
	switch name {
	case "count/daemonsets.apps":
		l := &appsv1.DaemonSetList{}
		err := c.reader.List(ctx, l, in)
		return int64(len(l.Items)), err
	case corev1.ResourceConfigMaps, "count/configmaps":
		l := &corev1.ConfigMapList{}
		err := c.reader.List(ctx, l, in)
		return int64(len(l.Items)), err
	case corev1.ResourceServices, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers, "count/services":
		if c.services == nil {
			l := &corev1.ServiceList{}
			if err := c.reader.List(ctx, l, in); err != nil {
				return 0, err
			}
			c.services = l
		}
		var n int64
		for _, s := range c.services.Items {
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
