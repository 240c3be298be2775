package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/internal/calico"
)

// maxListedNodes bounds the Windows node names kept in status and messages.
const maxListedNodes = 50

// windowsNodes lists the names of Nodes labelled kubernetes.io/os=windows,
// sorted. Nodes are cached as metadata only.
func windowsNodes(ctx context.Context, c client.Reader) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := c.List(ctx, list, client.MatchingLabels{calico.OSLabel: calico.OSWindows}); err != nil {
		return nil, fmt.Errorf("listing windows nodes: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return names, nil
}

func isWindows(o client.Object) bool {
	return o != nil && o.GetLabels()[calico.OSLabel] == calico.OSWindows
}

// windowsNodeChanged passes only the Node events that change the set of
// Windows nodes, so that heartbeats of thousands of Linux nodes do not wake
// the reconciler.
func windowsNodeChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isWindows(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return isWindows(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return isWindows(e.ObjectOld) != isWindows(e.ObjectNew) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// tunnelAddressAppeared passes the Node updates that give a Linux node its
// VXLAN tunnel address, which the BGP step waits for.
func tunnelAddressAppeared() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[calico.TunnelAnnotation] != e.ObjectNew.GetAnnotations()[calico.TunnelAnnotation]
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
