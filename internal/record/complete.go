package record

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// kubernetesService is the Service whose address every pod gets as
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
var kubernetesService = client.ObjectKey{Namespace: corev1.NamespaceDefault, Name: "kubernetes"}

// Complete fills in, from the cluster, what a record written by an earlier
// winready lacks and a rollback needs; what cannot be derived stays unset and
// Unknown names it. It changes only fields that are unset, so it is safe to
// call on every read.
//
// calico-node's address before the migration (servicesEndpoint.nodeEnv) came
// in after the first releases. When the ConfigMap existed, the Tigera operator
// gave calico-node its values. When it did not, the operator gave calico-node
// its own pod's KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, which
// are the kubernetes Service's address (pkg/controller/k8sapi reads them from
// its environment).
func Complete(ctx context.Context, r client.Reader, o *v1alpha1.Originals) error {
	if o == nil || o.ServicesEndpoint.NodeEnv != nil {
		return nil
	}
	if o.ServicesEndpoint.Present {
		o.ServicesEndpoint.NodeEnv = &v1alpha1.ServiceEndpointEnv{
			Host: o.ServicesEndpoint.Data[calico.ServiceHostKey], Port: o.ServicesEndpoint.Data[calico.ServicePortKey]}
		return nil
	}
	svc := &corev1.Service{}
	if err := r.Get(ctx, kubernetesService, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading Service %s to derive calico-node's address before the migration: %w", kubernetesService, err)
	}
	if env, ok := serviceEnv(svc); ok {
		o.ServicesEndpoint.NodeEnv = &env
	}
	return nil
}

// serviceEnv is the address kubelet gives pods for the Service: its cluster
// IP and the port named https, else its first port.
func serviceEnv(svc *corev1.Service) (v1alpha1.ServiceEndpointEnv, bool) {
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
		return v1alpha1.ServiceEndpointEnv{}, false
	}
	port := svc.Spec.Ports[0].Port
	for _, p := range svc.Spec.Ports {
		if p.Name == "https" {
			port = p.Port
		}
	}
	return v1alpha1.ServiceEndpointEnv{Host: ip, Port: strconv.Itoa(int(port))}, true
}
