package detect

import (
	"context"
	"errors"
	"strings"
	"testing"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/winready/winready/api/v1alpha1"
)

func reader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func kubeadm(config string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: KubeadmConfigNamespace, Name: KubeadmConfigName},
		Data: map[string]string{"ClusterConfiguration": config}}
}

func clusterInfo(server string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ClusterInfoNamespace, Name: ClusterInfoName},
		Data: map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server + "\n"}}
}

func slice(addr string, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
}

func TestAPIServerSources(t *testing.T) {
	for _, tc := range []struct {
		name string
		objs []client.Object
		want string
	}{
		{"kubeadm with a port", []client.Object{kubeadm("controlPlaneEndpoint: 10.0.0.10:6443"), clusterInfo("https://10.0.0.20:443")},
			"10.0.0.10:6443 kubeadm-config controlPlaneEndpoint"},
		{"kubeadm without a port", []client.Object{kubeadm("controlPlaneEndpoint: api.example.com")}, "api.example.com:6443 kubeadm-config controlPlaneEndpoint"},
		{"cluster-info", []client.Object{kubeadm("networking: {}"), clusterInfo("https://10.0.0.20")}, "10.0.0.20:443 cluster-info kubeconfig"},
		{"EndpointSlice, ready only", []client.Object{slice("10.0.0.30", true)}, "10.0.0.30:6443 kubernetes EndpointSlice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := APIServer(context.Background(), reader(t, tc.objs...))
			if err != nil {
				t.Fatal(err)
			}
			if got := ep.Host + ":" + ep.Port + " " + ep.Source; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	_, err := APIServer(context.Background(), reader(t, slice("10.0.0.30", false)))
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "set spec.apiServer") {
		t.Errorf("no ready endpoint: %v", err)
	}
}

func TestServiceCIDRs(t *testing.T) {
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12", "fd00:96::/108"}}}
	cidrs, source, err := ServiceCIDRs(context.Background(), reader(t, sc, kubeadm("networking:\n  serviceSubnet: 10.100.0.0/16")))
	if err != nil || strings.Join(cidrs, ",") != "10.96.0.0/12" || source != "ServiceCIDR objects" {
		t.Errorf("ServiceCIDR objects: %v %q %v", cidrs, source, err)
	}
	cidrs, source, err = ServiceCIDRs(context.Background(), reader(t, kubeadm("networking:\n  serviceSubnet: 10.100.0.1/16,fd00::/108")))
	if err != nil || strings.Join(cidrs, ",") != "10.100.0.0/16" || source != "kubeadm-config serviceSubnet" {
		t.Errorf("kubeadm: %v %q %v", cidrs, source, err)
	}
	if _, _, err := ServiceCIDRs(context.Background(), reader(t)); !errors.Is(err, ErrNotFound) {
		t.Errorf("nothing to find: %v", err)
	}
	// Kubernetes 1.31 and 1.32 serve no networking.k8s.io/v1 ServiceCIDRs.
	unserved := interceptor.NewClient(reader(t, kubeadm("networking:\n  serviceSubnet: 10.100.0.0/16")).(client.WithWatch),
		interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*networkingv1.ServiceCIDRList); ok {
				return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "networking.k8s.io", Kind: "ServiceCIDR"},
					SearchedVersions: []string{"v1"}}
			}
			return c.List(ctx, list, opts...)
		}})
	cidrs, source, err = ServiceCIDRs(context.Background(), unserved)
	if err != nil || strings.Join(cidrs, ",") != "10.100.0.0/16" || source != "kubeadm-config serviceSubnet" {
		t.Errorf("ServiceCIDRs not served: %v %q %v", cidrs, source, err)
	}
}

func TestTargetsPrecedence(t *testing.T) {
	r := reader(t, kubeadm("controlPlaneEndpoint: 10.0.0.10:6443\nnetworking:\n  serviceSubnet: 10.96.0.0/12"))
	inst := &operatorv1.Installation{}
	endpoint := &corev1.ConfigMap{Data: map[string]string{serviceHostKey: "10.0.0.99", servicePortKey: "443"}}

	detected, err := Targets(context.Background(), r, v1alpha1.WindowsReadinessSpec{}, inst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if detected.APIServerHost != "10.0.0.10" || strings.Join(detected.ServiceCIDRs, ",") != "10.96.0.0/12" ||
		detected.Source != "serviceCIDRs from kubeadm-config serviceSubnet; API server from kubeadm-config controlPlaneEndpoint" {
		t.Errorf("detected: %+v", detected)
	}

	held := &operatorv1.Installation{Spec: operatorv1.InstallationSpec{ServiceCIDRs: []string{"10.97.0.0/16"}}}
	kept, err := Targets(context.Background(), r, v1alpha1.WindowsReadinessSpec{}, held, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if kept.APIServerHost != "10.0.0.99" || kept.ServiceCIDRs[0] != "10.97.0.0/16" {
		t.Errorf("what the cluster holds is not kept: %+v", kept)
	}

	spec := v1alpha1.WindowsReadinessSpec{ServiceCIDRs: []v1alpha1.IPv4CIDR{"10.98.0.0/16"}, APIServer: &v1alpha1.APIServerEndpoint{Host: "10.0.0.5", Port: 8443}}
	overridden, err := Targets(context.Background(), r, spec, held, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if overridden.APIServerPort != "8443" || overridden.ServiceCIDRs[0] != "10.98.0.0/16" ||
		overridden.Source != "serviceCIDRs from spec; API server from spec" {
		t.Errorf("the spec does not win: %+v", overridden)
	}
}

func TestAPIServerListsEveryEndpointSliceMember(t *testing.T) {
	a, b := slice("10.0.0.2", true), slice("10.0.0.3", true)
	b.Name = "kubernetes-extra"
	b.Endpoints = append(b.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.4"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	ep, err := APIServer(context.Background(), reader(t, a, b))
	if err != nil {
		t.Fatal(err)
	}
	if ep.Host != "10.0.0.2" || ep.Source != SourceEndpointSlice || strings.Join(ep.Members, ",") != "10.0.0.2:6443,10.0.0.3:6443" {
		t.Fatalf("got %+v; want 10.0.0.2 first and the ready members once each", ep)
	}
}
