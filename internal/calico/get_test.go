package calico

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestReadDaemonSetAbsentPresentFailing(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	empty := fake.NewClientBuilder().WithScheme(s).Build()
	if ds, err := ReadDaemonSet(ctx, empty, NodeDaemonSet); ds != nil || err != nil {
		t.Errorf("absent: %v, %v", ds, err)
	}
	present := fake.NewClientBuilder().WithScheme(s).WithObjects(&appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: NodeDaemonSet}}).Build()
	if ds, err := ReadDaemonSet(ctx, present, NodeDaemonSet); ds == nil || err != nil || ds.Name != NodeDaemonSet {
		t.Errorf("present: %v, %v", ds, err)
	}
	failing := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("connection reset")
		}}).Build()
	_, err := ReadDaemonSet(ctx, failing, NodeDaemonSet)
	if err == nil || err.Error() != "reading daemonset calico-system/calico-node: connection reset" {
		t.Errorf("failing: %v", err)
	}
}
