package calico

import (
	operatorv1 "github.com/tigera/operator/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DNSService is the cluster DNS Service the Tigera operator's Windows
// controller reads for a kubernetesProvider (pkg/controller/utils
// GetDNSServiceName): without it calico-windows stays Degraded and
// calico-node-windows is never rendered. The operator decides by the provider
// it detects, which it also writes into an Installation that names none, so
// the Installation's spec.kubernetesProvider stands for it.
func DNSService(provider operatorv1.Provider) client.ObjectKey {
	switch {
	case provider.IsOpenShift():
		return client.ObjectKey{Namespace: "openshift-dns", Name: "dns-default"}
	case provider.IsRKE2():
		return client.ObjectKey{Namespace: "kube-system", Name: "rke2-coredns-rke2-coredns"}
	}
	return client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}
}
