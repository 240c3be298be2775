package record

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/winready/winready/api/v1alpha1"
)

// A record names the WindowsReadiness whose migration wrote it, so that one
// written by anyone else (an earlier object, an earlier winready, whoever
// held the manager's token while no WindowsReadiness existed) is told apart.
func TestARecordNamesTheWindowsReadinessThatWroteIt(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	o := &v1alpha1.Originals{BGP: v1alpha1.OriginalValue{Present: true, Value: "Enabled"},
		ServicesEndpoint: v1alpha1.OriginalConfigMap{NodeEnv: &v1alpha1.ServiceEndpointEnv{Host: "10.96.0.1", Port: "443"}}}
	if created, err := Save(ctx, c, "winready-system", "uid-1", o); err != nil || !created {
		t.Fatalf("Save: created %v, %v", created, err)
	}
	rec, err := Load(ctx, c, "winready-system")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.WrittenBy("uid-1") || rec.WrittenBy("uid-2") || rec.WrittenBy("") {
		t.Errorf("written for %q: WrittenBy(uid-1) %v, WrittenBy(uid-2) %v", rec.WrittenFor, rec.WrittenBy("uid-1"), rec.WrittenBy("uid-2"))
	}
	if rec.Originals.BGP.Value != "Enabled" {
		t.Errorf("originals read back: %+v", rec.Originals)
	}
}

func TestARecordWithoutAWriterIsNobodysOwn(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "winready-system", Name: Name},
		Data: map[string]string{key: `{"recordedAt":"2026-11-20T10:00:00Z","ipamConfig":{"present":false},` +
			`"pools":[{"name":"default-ipv4-ippool","cidr":"10.244.0.0/16","encapsulation":"None"}],` +
			`"bgp":{"present":true,"value":"Enabled"},"servicesEndpoint":{"present":true,"data":{"KUBERNETES_SERVICE_HOST":"192.0.2.1","KUBERNETES_SERVICE_PORT":"6443"}},` +
			`"serviceCIDRs":{"present":false},"windowsDataplane":{"present":false},"windowsNodesPresent":false,` +
			`"nodeMaxUnavailable":{"present":true,"value":"100%"}}`}}
	rec, err := Load(context.Background(), fake.NewClientBuilder().WithObjects(cm).Build(), "winready-system")
	if err != nil {
		t.Fatal(err)
	}
	if rec.WrittenBy("uid-1") || rec.WrittenFor != "" {
		t.Errorf("a record without writtenFor is written by %q", rec.WrittenFor)
	}
	holds := Holds(rec.Originals)
	for _, want := range []string{"pool 10.244.0.0/16 encapsulation None", "calico-node maxUnavailable 100%", "services endpoint 192.0.2.1:6443", "bgp Enabled"} {
		if !strings.Contains(holds, want) {
			t.Errorf("Holds says %q, without %q", holds, want)
		}
	}
}
