package calicosim

import (
	"context"
	"fmt"
	"time"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	cleanInterval = 20 * time.Millisecond
	cleanTimeout  = 30 * time.Second
)

// Clean deletes everything Seed and the simulator created and waits until it is gone. The Installation goes
// first, so that a running simulator stops recreating objects; the rest is deleted again on every poll (a
// reconcile that began before the Installation vanished may still write once) until two polls in a row find
// nothing. Namespaces stay: envtest has no namespace controller to finish deleting them.
func Clean(ctx context.Context, c client.Client) error {
	overlay := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: overlayName}}
	if err := client.IgnoreNotFound(c.Delete(ctx, overlay)); err != nil {
		return fmt.Errorf("deleting Installation overlay: %w", err)
	}
	inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: installationName}}
	if err := client.IgnoreNotFound(c.Delete(ctx, inst)); err != nil {
		return fmt.Errorf("deleting Installation: %w", err)
	}
	err := wait.PollUntilContextTimeout(ctx, cleanInterval, cleanTimeout, true, func(ctx context.Context) (bool, error) {
		return gone(ctx, c, inst)
	})
	if err != nil {
		return fmt.Errorf("waiting for the Installation to go: %w", err)
	}

	cleanPolls := 0
	err = wait.PollUntilContextTimeout(ctx, cleanInterval, cleanTimeout, true, func(ctx context.Context) (bool, error) {
		left, err := deleteSeeded(ctx, c)
		if err != nil {
			return false, err
		}
		if left > 0 {
			cleanPolls = 0
			return false, nil
		}
		cleanPolls++
		return cleanPolls >= 2, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the simulated cluster to go: %w", err)
	}
	return nil
}

// deleteSeeded deletes what is left and says how many objects it found.
func deleteSeeded(ctx context.Context, c client.Client) (int, error) {
	left := 0
	lists := []struct {
		list client.ObjectList
		opts []client.ListOption
	}{
		{&calicov3.IPPoolList{}, []client.ListOption{client.MatchingLabels{managedByLabel: managedByValue}}},
		{&appsv1.DaemonSetList{}, []client.ListOption{client.InNamespace(calicoNamespace)}},
		{&operatorv1.TigeraStatusList{}, nil},
		{&operatorv1.ImageSetList{}, nil},
		{&corev1.NodeList{}, nil},
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			return 0, fmt.Errorf("listing %T: %w", l.list, err)
		}
		items, err := meta.ExtractList(l.list)
		if err != nil {
			return 0, err
		}
		for _, item := range items {
			obj := item.(client.Object)
			left++
			if err := client.IgnoreNotFound(c.Delete(ctx, obj)); err != nil {
				return 0, fmt.Errorf("deleting %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
			}
		}
	}
	windows, err := deleteWindowsNodeObjects(ctx, c)
	if err != nil {
		return 0, err
	}
	left += windows
	singles := []client.Object{
		&calicov3.IPAMConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ipamConfigName}},
		&calicov3.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: felixConfigName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: servicesEndpointCM}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kubeSystem, Name: kubeadmConfigName}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: kubeSystem, Name: kubeDNSName}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: kubeSystem, Name: rke2DNSName}},
	}
	for _, obj := range singles {
		err := c.Delete(ctx, obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return 0, fmt.Errorf("deleting %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
		default:
			left++
		}
	}
	return left, nil
}

func gone(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
