package calico

import (
	"testing"

	operatorv1 "github.com/tigera/operator/api/v1"
)

// The names are the Tigera operator v1.43.0's (pkg/controller/utils GetDNSServiceName).
func TestDNSService(t *testing.T) {
	for provider, want := range map[operatorv1.Provider]string{
		operatorv1.ProviderNone:      "kube-system/kube-dns",
		operatorv1.ProviderEKS:       "kube-system/kube-dns",
		operatorv1.ProviderKind:      "kube-system/kube-dns",
		operatorv1.ProviderRKE2:      "kube-system/rke2-coredns-rke2-coredns",
		operatorv1.ProviderOpenShift: "openshift-dns/dns-default",
	} {
		if got := DNSService(provider).String(); got != want {
			t.Errorf("%q: got %s, want %s", provider, got, want)
		}
	}
}
