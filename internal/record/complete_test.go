package record

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/winready/winready/api/v1alpha1"
)

func kubernetesSvc(ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

// TestCompleteDerivesWhatAnEarlierRecordLacks: records written before
// servicesEndpoint.nodeEnv existed get it from what the Tigera operator gave
// calico-node then.
func TestCompleteDerivesWhatAnEarlierRecordLacks(t *testing.T) {
	https := corev1.ServicePort{Name: "https", Port: 443}
	for _, tc := range []struct {
		name    string
		before  v1alpha1.OriginalConfigMap
		objects []runtime.Object
		want    *v1alpha1.ServiceEndpointEnv
	}{
		{"no ConfigMap: the kubernetes Service's address, as the operator's pod had it",
			v1alpha1.OriginalConfigMap{}, []runtime.Object{kubernetesSvc("10.96.0.1", https)},
			&v1alpha1.ServiceEndpointEnv{Host: "10.96.0.1", Port: "443"}},
		{"the port named https wins over the first",
			v1alpha1.OriginalConfigMap{}, []runtime.Object{kubernetesSvc("10.96.0.1", corev1.ServicePort{Name: "other", Port: 80}, https)},
			&v1alpha1.ServiceEndpointEnv{Host: "10.96.0.1", Port: "443"}},
		{"a ConfigMap: its values, which the operator copied into calico-node",
			v1alpha1.OriginalConfigMap{Present: true, Data: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.5", "KUBERNETES_SERVICE_PORT": "6443"}},
			nil, &v1alpha1.ServiceEndpointEnv{Host: "10.0.0.5", Port: "6443"}},
		{"a recorded address is kept",
			v1alpha1.OriginalConfigMap{NodeEnv: &v1alpha1.ServiceEndpointEnv{Host: "10.1.1.1", Port: "8443"}},
			[]runtime.Object{kubernetesSvc("10.96.0.1", https)}, &v1alpha1.ServiceEndpointEnv{Host: "10.1.1.1", Port: "8443"}},
		{"no kubernetes Service: unknown", v1alpha1.OriginalConfigMap{}, nil, nil},
		{"a headless kubernetes Service: unknown", v1alpha1.OriginalConfigMap{},
			[]runtime.Object{kubernetesSvc(corev1.ClusterIPNone, https)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithRuntimeObjects(tc.objects...).Build()
			o := &v1alpha1.Originals{ServicesEndpoint: tc.before}
			if err := Complete(context.Background(), c, o); err != nil {
				t.Fatal(err)
			}
			got := o.ServicesEndpoint.NodeEnv
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("nodeEnv %+v, want %+v", got, tc.want)
			}
			unknown := Unknown(o, "winready-system")
			if (len(unknown) > 0) != (tc.want == nil) {
				t.Errorf("Unknown = %q with nodeEnv %+v", unknown, got)
			}
			if len(unknown) > 0 && !strings.Contains(unknown[0], "ConfigMap winready-system/winready-originals") {
				t.Errorf("Unknown does not say where to supply the value: %q", unknown[0])
			}
		})
	}
}

func TestLoadCompletesAnEarlierRecord(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "winready-system", Name: Name},
		// A record as f27ae92 wrote it: no nodeEnv.
		Data: map[string]string{key: `{"recordedAt":"2026-11-20T10:00:00Z","ipamConfig":{"present":false},` +
			`"bgp":{"present":true,"value":"Enabled"},"servicesEndpoint":{"present":false},` +
			`"serviceCIDRs":{"present":false},"windowsDataplane":{"present":false},"windowsNodesPresent":false}`}}
	c := fake.NewClientBuilder().WithObjects(cm, kubernetesSvc("10.96.0.1", corev1.ServicePort{Name: "https", Port: 443})).Build()
	rec, err := Load(context.Background(), c, "winready-system")
	if err != nil {
		t.Fatal(err)
	}
	o := rec.Originals
	if o.ServicesEndpoint.NodeEnv == nil || o.ServicesEndpoint.NodeEnv.Host != "10.96.0.1" || o.BGP.Value != "Enabled" {
		t.Errorf("loaded %+v", o)
	}
}
