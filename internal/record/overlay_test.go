package record

import (
	"context"
	"encoding/json"
	"testing"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/winready/winready/api/v1alpha1"
)

func TestOverlayRecordsTheFieldsTheMigrationChanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		overlay *operatorv1.Installation
		want    v1alpha1.OriginalOverlay
	}{
		{"no overlay", nil, v1alpha1.OriginalOverlay{}},
		{"an overlay of other fields", &operatorv1.Installation{Spec: operatorv1.InstallationSpec{
			CalicoNetwork: &operatorv1.CalicoNetworkSpec{MTU: ptr.To[int32](1400)}}},
			v1alpha1.OriginalOverlay{Present: true}},
		{"an overlay of every field", &operatorv1.Installation{Spec: operatorv1.InstallationSpec{
			CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled),
				WindowsDataplane: ptr.To(operatorv1.WindowsDataplaneDisabled),
				IPPools:          []operatorv1.IPPool{{Name: "a", CIDR: "10.1.0.0/16", Encapsulation: operatorv1.EncapsulationVXLAN}}},
			ServiceCIDRs: []string{"10.96.0.0/12"}, WindowsNodes: &operatorv1.WindowsNodeSpec{CNIBinDir: "/x"}}},
			v1alpha1.OriginalOverlay{Present: true, BGP: v1alpha1.OriginalValue{Present: true, Value: "Enabled"},
				WindowsDataplane: v1alpha1.OriginalValue{Present: true, Value: "Disabled"},
				PoolsPresent:     true, Pools: []v1alpha1.OriginalPool{{Name: "a", CIDR: "10.1.0.0/16", Encapsulation: "VXLAN"}},
				ServiceCIDRs: v1alpha1.OriginalList{Present: true, Values: []string{"10.96.0.0/12"}}, WindowsNodesPresent: true}},
		{"an empty pool list is set: it replaces default's", &operatorv1.Installation{Spec: operatorv1.InstallationSpec{
			CalicoNetwork: &operatorv1.CalicoNetworkSpec{IPPools: []operatorv1.IPPool{}}}},
			v1alpha1.OriginalOverlay{Present: true, PoolsPresent: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Overlay(tc.overlay); !equality.Semantic.DeepEqual(*got, tc.want) {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestEffectiveOriginals(t *testing.T) {
	defaults := v1alpha1.Originals{BGP: v1alpha1.OriginalValue{Present: true, Value: "Enabled"},
		WindowsDataplane: v1alpha1.OriginalValue{Present: true, Value: "Disabled"},
		Pools:            []v1alpha1.OriginalPool{{Name: "p", CIDR: "10.0.0.0/16", Encapsulation: "VXLANCrossSubnet"}}}
	for _, tc := range []struct {
		name    string
		overlay *v1alpha1.OriginalOverlay
		want    func(*v1alpha1.Originals)
	}{
		{"a record without the overlay: default's", nil, func(*v1alpha1.Originals) {}},
		{"no overlay: default's", &v1alpha1.OriginalOverlay{}, func(*v1alpha1.Originals) {}},
		{"an overlay of other fields: default's", &v1alpha1.OriginalOverlay{Present: true}, func(*v1alpha1.Originals) {}},
		{"what the overlay set wins", &v1alpha1.OriginalOverlay{Present: true, BGP: v1alpha1.OriginalValue{Present: true, Value: "Disabled"},
			PoolsPresent: true, ServiceCIDRs: v1alpha1.OriginalList{Present: true, Values: []string{"10.96.0.0/12"}}, WindowsNodesPresent: true},
			func(o *v1alpha1.Originals) {
				o.BGP.Value, o.Pools, o.WindowsNodesPresent = "Disabled", nil, true
				o.ServiceCIDRs = v1alpha1.OriginalList{Present: true, Values: []string{"10.96.0.0/12"}}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults.DeepCopy()
			o.Overlay = tc.overlay
			want := o.DeepCopy()
			tc.want(want)
			if got := Effective(o); !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			if o.BGP.Value != "Enabled" {
				t.Fatal("the record itself changed")
			}
		})
	}
}

// A record written before the overlay was recorded loads without it, and a
// new one keeps it through the ConfigMap.
func TestTheOverlayRecordIsOptional(t *testing.T) {
	old := `{"recordedAt":"2026-11-20T10:00:00Z","ipamConfig":{"present":false},"bgp":{"present":true,"value":"Enabled"},` +
		`"servicesEndpoint":{"present":false,"nodeEnv":{"host":"10.96.0.1","port":"443"}},"serviceCIDRs":{"present":false},` +
		`"windowsDataplane":{"present":false},"windowsNodesPresent":false,"nodeMaxUnavailable":{"present":true,"value":"1"}}`
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "winready-system", Name: Name}, Data: map[string]string{key: old}}
	c := fake.NewClientBuilder().WithObjects(cm).Build()
	rec, err := Load(context.Background(), c, "winready-system")
	if err != nil {
		t.Fatal(err)
	}
	o := rec.Originals
	if o.Overlay != nil || Effective(o) != o {
		t.Fatalf("an earlier record: overlay %+v", o.Overlay)
	}

	o.Overlay = &v1alpha1.OriginalOverlay{Present: true}
	if err := Delete(context.Background(), c, c, "winready-system"); err != nil {
		t.Fatal(err)
	}
	if created, err := Save(context.Background(), c, "winready-system", "uid-1", o); err != nil || !created {
		t.Fatalf("Save after Delete: created %v, %v", created, err)
	}
	back, err := Load(context.Background(), c, "winready-system")
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(back.Originals, o) {
		raw, _ := json.Marshal(back.Originals)
		t.Fatalf("read back %s", raw)
	}
}
