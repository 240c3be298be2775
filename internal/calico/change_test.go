package calico

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestValueRendering(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{Value{}, Absent},
		{Of("VXLAN"), "VXLAN"},
		{Of(false), "false"},
		{Of([]string{"10.96.0.0/12", "fd00::/108"}), "[10.96.0.0/12, fd00::/108]"},
		{Of(nil), "present"},
		{Value{Present: true, V: "", Opaque: true}, "<set by the Tigera operator>"},
	} {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("%#v renders %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestValueEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b Value
		want bool
	}{
		{Value{}, Value{}, true},
		{Value{}, Of(""), false},
		{Of("a"), Of("a"), true},
		{Of([]string{"a"}), Of([]string{"a"}), true},
		{Of([]string{"a"}), Of([]string{"a", "b"}), false},
		{OfList(nil), Of([]string{}), false},
		{Of(true), Of(false), false},
	} {
		if got := tc.a.Equal(tc.b); got != tc.want {
			t.Errorf("%v == %v is %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestChangeField(t *testing.T) {
	pool := Change{Object: ObjectInstallation, Pointer: PoolPath(1, "encapsulation"), Pool: &PoolItem{Name: "p1", CIDR: "10.0.0.0/16"}}
	for _, tc := range []struct {
		c          Change
		field, aft string
	}{
		{pool, "spec.calicoNetwork.ipPools[name=p1].encapsulation", Absent},
		{Change{Pointer: PathBGP, New: Of("Disabled")}, "spec.calicoNetwork.bgp", "Disabled"},
		{Change{Pointer: DataPointer(ServiceHostKey)}, "data.KUBERNETES_SERVICE_HOST", Absent},
		{Change{Old: Of(nil)}, "(object)", Absent + " (deleted)"},
		{Change{Old: Of(nil), Later: "once X"}, "(object)", Absent + " (deleted once X)"},
	} {
		if got := tc.c.Field(); got != tc.field {
			t.Errorf("field %q, want %q", got, tc.field)
		}
		if got := tc.c.After(); got != tc.aft {
			t.Errorf("after %q, want %q", got, tc.aft)
		}
	}
	if due := Due([]Change{{Pointer: "/a"}, {Later: "then"}}); len(due) != 1 || due[0].Pointer != "/a" {
		t.Errorf("Due kept %v", due)
	}
}

// ops renders a patch as the JSON sent, for comparison.
func ops(t *testing.T, p *Patch, inst *operatorv1.Installation) string {
	t.Helper()
	b, err := json.Marshal(p.Ops(inst))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// read is inst as read at resourceVersion 7, generation 3.
func read(inst *operatorv1.Installation) *operatorv1.Installation {
	out := inst.DeepCopy()
	out.ResourceVersion, out.Generation = "7", 3
	return out
}

func TestInstallationPatch(t *testing.T) {
	withNetwork := &operatorv1.Installation{Spec: operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{}}}
	bare := &operatorv1.Installation{}
	held := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{HoldAnnotation: "2026-12-03T13:00:00Z"}}}
	for _, tc := range []struct {
		name    string
		inst    *operatorv1.Installation
		changes []Change
		want    string
	}{{
		name:    "a replaced value is tested first, no resourceVersion guard",
		inst:    withNetwork,
		changes: []Change{{Pointer: PathBGP, Old: Of("Enabled"), New: Of("Disabled")}},
		want:    `[{"op":"test","path":"/spec/calicoNetwork/bgp","value":"Enabled"},{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`,
	}, {
		name:    "an absent field is added under the generation guard, which status and metadata writes never move",
		inst:    withNetwork,
		changes: []Change{{Pointer: PathBGP, New: Of("Disabled")}},
		want:    `[{"op":"test","path":"/metadata/generation","value":3},{"op":"add","path":"/spec/calicoNetwork/bgp","value":"Disabled"}]`,
	}, {
		name:    "a missing calicoNetwork is added first",
		inst:    bare,
		changes: []Change{{Pointer: PathWindowsDataplane, New: Of("HNS")}},
		want: `[{"op":"test","path":"/metadata/generation","value":3},{"op":"add","path":"/spec/calicoNetwork","value":{}},` +
			`{"op":"add","path":"/spec/calicoNetwork/windowsDataplane","value":"HNS"}]`,
	}, {
		name:    "a missing rolling update is added first, keeping the strategy's type",
		inst:    &operatorv1.Installation{Spec: operatorv1.InstallationSpec{NodeUpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}}},
		changes: []Change{{Pointer: PathNodeMaxUnavailable, New: Of(int64(5))}},
		want: `[{"op":"test","path":"/metadata/generation","value":3},` +
			`{"op":"add","path":"/spec/nodeUpdateStrategy","value":{"rollingUpdate":{},"type":"RollingUpdate"}},` +
			`{"op":"add","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable","value":5}]`,
	}, {
		name:    "a count is tested as a number",
		inst:    &operatorv1.Installation{Spec: operatorv1.InstallationSpec{NodeUpdateStrategy: appsv1.DaemonSetUpdateStrategy{RollingUpdate: &appsv1.RollingUpdateDaemonSet{}}}},
		changes: []Change{{Pointer: PathNodeMaxUnavailable, Old: Of(int64(1)), New: Of("25%")}},
		want: `[{"op":"test","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable","value":1},` +
			`{"op":"replace","path":"/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable","value":"25%"}]`,
	}, {
		name:    "a removed value is tested",
		inst:    bare,
		changes: []Change{{Pointer: PathServiceCIDRs, Old: Of([]string{"10.96.0.0/12"})}},
		want:    `[{"op":"test","path":"/spec/serviceCIDRs","value":["10.96.0.0/12"]},{"op":"remove","path":"/spec/serviceCIDRs"}]`,
	}, {
		name:    "an opaque structure is removed under the generation guard",
		inst:    bare,
		changes: []Change{{Pointer: PathWindowsNodes, Old: Value{Present: true, Opaque: true}}},
		want:    `[{"op":"test","path":"/metadata/generation","value":3},{"op":"remove","path":"/spec/windowsNodes"}]`,
	}, {
		name:    "the hold's mark goes into an Installation without annotations, tested absent first",
		inst:    withNetwork,
		changes: []Change{HoldChange(withNetwork, time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC))},
		want: `[{"op":"test","path":"/metadata/annotations"},{"op":"add","path":"/metadata/annotations","value":{}},` +
			`{"op":"add","path":"/metadata/annotations/winready.io~1calico-node-held","value":"2026-12-03T13:00:00Z"}]`,
	}, {
		name: "the hold's mark goes into existing annotations with the held changes under the generation guard",
		inst: &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"example.com/x": "y"}},
			Spec: operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{}}},
		changes: []Change{{Pointer: PathBGP, New: Of("Disabled")}, HoldChange(withNetwork, time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC))},
		want: `[{"op":"test","path":"/metadata/generation","value":3},{"op":"add","path":"/spec/calicoNetwork/bgp","value":"Disabled"},` +
			`{"op":"add","path":"/metadata/annotations/winready.io~1calico-node-held","value":"2026-12-03T13:00:00Z"}]`,
	}, {
		name:    "the hold's mark comes off tested by its value",
		inst:    held,
		changes: ReleaseChange(held),
		want: `[{"op":"test","path":"/metadata/annotations/winready.io~1calico-node-held","value":"2026-12-03T13:00:00Z"},` +
			`{"op":"remove","path":"/metadata/annotations/winready.io~1calico-node-held"}]`,
	}, {
		name: "a pool's index is guarded by its CIDR",
		inst: withNetwork,
		changes: []Change{{Pointer: PoolPath(2, "encapsulation"), Pool: &PoolItem{Name: "b", CIDR: "10.2.0.0/16"},
			Old: Of("VXLANCrossSubnet"), New: Of("VXLAN")}},
		want: `[{"op":"test","path":"/spec/calicoNetwork/ipPools/2/cidr","value":"10.2.0.0/16"},` +
			`{"op":"test","path":"/spec/calicoNetwork/ipPools/2/encapsulation","value":"VXLANCrossSubnet"},` +
			`{"op":"replace","path":"/spec/calicoNetwork/ipPools/2/encapsulation","value":"VXLAN"}]`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// Claimed already, as after winready's first write: the claim's
			// own operations are TestInstallationPatchClaims's.
			inst := tc.inst.DeepCopy()
			inst.Labels = map[string]string{ClaimLabel: "true"}
			if got := ops(t, InstallationPatch(inst, tc.changes), read(inst)); got != tc.want {
				t.Errorf("patch\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	if p := InstallationPatch(withNetwork, nil); !p.Empty() {
		t.Error("no change, yet the patch is not empty")
	}
}

func TestClassifyPatchError(t *testing.T) {
	gr := schema.GroupResource{Group: "operator.tigera.io", Resource: "installations"}
	// As the apiserver's JSON patch handler builds it.
	failedTest := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
		"testing value /spec/calicoNetwork/bgp failed: test failed", 0, false)
	invalidPool := apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Installation"}, "default", field.ErrorList{
		field.Invalid(field.NewPath("spec", "calicoNetwork", "ipPools").Index(0).Child("name"), "test-pool",
			"pool test-pool: encapsulation None is not allowed with BGP Disabled")})
	for _, tc := range []struct {
		name  string
		err   error
		guard bool
	}{
		{"a conflict", apierrors.NewConflict(gr, "default", errors.New("the object has been modified")), true},
		{"a failed test operation", failedTest, true},
		{"validation naming a pool test-pool", invalidPool, false},
		{"forbidden", apierrors.NewForbidden(gr, "default", errors.New("no")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errors.Is(classifyPatchError(tc.err), ErrGuardFailed); got != tc.guard {
				t.Errorf("classified as guard failure: %v, want %v (%v)", got, tc.guard, tc.err)
			}
		})
	}
}

func TestCommitYAML(t *testing.T) {
	changes := []Change{
		{Object: ObjectInstallation, Pointer: PathBGP, Old: Of("Enabled"), New: Of("Disabled")},
		{Object: ObjectInstallation, Pointer: PoolPath(0, "encapsulation"), Pool: &PoolItem{Name: "a", CIDR: "10.0.0.0/16"}, New: Of("VXLAN")},
		{Object: ObjectInstallation, Pointer: PoolPath(1, "encapsulation"), Pool: &PoolItem{Name: "b", CIDR: "10.1.0.0/16"}, New: Of("VXLAN")},
		{Object: ObjectInstallation, Pointer: PathServiceCIDRs, New: Of([]string{"10.96.0.0/12"})},
		{Object: ObjectInstallation, Pointer: PathWindowsNodes, Old: Value{Present: true, Opaque: true}},
		{Object: ObjectServicesEndpoint, Pointer: DataPointer(ServiceHostKey), New: Of("10.0.0.1")},
	}
	want := `spec:
  calicoNetwork:
    bgp: Disabled
    ipPools:
    - encapsulation: VXLAN
      name: a
    - encapsulation: VXLAN
      name: b
  serviceCIDRs:
  - 10.96.0.0/12
`
	if got := CommitYAML(changes); got != want {
		t.Errorf("YAML\n%s\nwant\n%s", got, want)
	}
}

func TestLastManager(t *testing.T) {
	entry := func(manager, fields string, at int64) metav1.ManagedFieldsEntry {
		ts := metav1.Unix(at, 0)
		return metav1.ManagedFieldsEntry{Manager: manager, Time: &ts, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		entry("winready", `{"f:spec":{"f:calicoNetwork":{"f:bgp":{}}}}`, 30),
		entry("argocd-controller", `{"f:spec":{"f:calicoNetwork":{"f:bgp":{},"f:ipPools":{}}}}`, 20),
		entry("kubectl", `{"f:spec":{"f:calicoNetwork":{"f:ipPools":{}}}}`, 25),
	}}}
	bgp := []Change{{Object: ObjectInstallation, Pointer: PathBGP}}
	if got := LastManager(inst, bgp, "winready"); got != "argocd-controller" {
		t.Errorf("bgp: %q", got)
	}
	pool := []Change{{Object: ObjectInstallation, Pointer: PoolPath(0, "encapsulation")}}
	if got := LastManager(inst, pool, "winready"); got != "kubectl" {
		t.Errorf("pool: %q, want the latest writer of the pools", got)
	}
	cidrs := []Change{{Object: ObjectInstallation, Pointer: PathServiceCIDRs}}
	if got := LastManager(inst, cidrs, "winready"); got != "" {
		t.Errorf("serviceCIDRs: %q, want none", got)
	}
}

func TestOwnedBy(t *testing.T) {
	inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "winready", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:calicoNetwork":{"f:bgp":{}},"f:nodeUpdateStrategy":{"f:rollingUpdate":{"f:maxUnavailable":{}}}}}`)},
		{Manager: "operator", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:nodeUpdateStrategy":{"f:type":{}}}}`)},
	}}}
	if !OwnedBy(inst, PathNodeMaxUnavailable, "winready") {
		t.Error("winready's maxUnavailable is not seen as its own")
	}
	if OwnedBy(inst, PathNodeMaxUnavailable, "operator") || OwnedBy(inst, PathServiceCIDRs, "winready") {
		t.Error("a field another manager owns, or nobody, is seen as owned")
	}
}

func TestInstallationPatchClaims(t *testing.T) {
	bgpOff := []Change{{Pointer: PathBGP, Old: Of("Enabled"), New: Of("Disabled")}}
	network := operatorv1.InstallationSpec{CalicoNetwork: &operatorv1.CalicoNetworkSpec{BGP: ptr.To(operatorv1.BGPEnabled)}}
	spec := `{"op":"test","path":"/spec/calicoNetwork/bgp","value":"Enabled"},{"op":"replace","path":"/spec/calicoNetwork/bgp","value":"Disabled"}`
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{{
		name: "no labels: a map created whole, guarded by a test that there is none",
		want: `[` + spec + `,{"op":"test","path":"/metadata/labels"},{"op":"add","path":"/metadata/labels","value":{"winready.io/claimed":"true"}}]`,
	}, {
		name:   "another's labels: the claim added beside them",
		labels: map[string]string{"example.com/x": "y"},
		want:   `[` + spec + `,{"op":"add","path":"/metadata/labels/winready.io~1claimed","value":"true"}]`,
	}, {
		name:   "claimed: nothing more",
		labels: map[string]string{ClaimLabel: "true"},
		want:   `[` + spec + `]`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}, Spec: *network.DeepCopy()}
			if got := ops(t, InstallationPatch(inst, bgpOff), read(inst)); got != tc.want {
				t.Errorf("patch\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	if p := InstallationPatch(&operatorv1.Installation{}, nil); !p.Empty() {
		t.Error("no change claims nothing")
	}
	held := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ClaimLabel: "true"},
		Annotations: map[string]string{HoldAnnotation: "2026-12-03T13:00:00Z"}}}
	want := `[{"op":"test","path":"/metadata/annotations/winready.io~1calico-node-held","value":"2026-12-03T13:00:00Z"},` +
		`{"op":"remove","path":"/metadata/annotations/winready.io~1calico-node-held"},` +
		`{"op":"test","path":"/metadata/labels/winready.io~1claimed","value":"true"},{"op":"remove","path":"/metadata/labels/winready.io~1claimed"}]`
	if got := ops(t, UnclaimPatch(held), read(held)); got != want {
		t.Errorf("the claim lifted with the hold's mark\n got %s\nwant %s", got, want)
	}
	orphan := held.DeepCopy()
	orphan.Labels = nil
	if got := ops(t, ReleasePatch(orphan), read(orphan)); strings.Contains(got, "labels") {
		t.Errorf("a hold released with no WindowsReadiness claims nothing: %s", got)
	}
}
