package calico

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IgnoreAnnotation "true" on an existing object makes the Tigera operator's
// component handler leave it alone (pkg/controller/utils/component.go,
// IgnoreObject): it renders the object and does not update it. Held on
// calico-node while winready writes changes that span the Installation and
// the services-endpoint ConfigMap, it keeps the operator from rendering the
// template of one without the other: the operator reads the Installation at
// the start of a reconcile and the ConfigMap near its end, so without the hold
// a reconcile under way between the two writes renders a template that mixes
// old and new, which the DaemonSet controller starts rolling out before the
// next reconcile replaces it. The Installation's nodeUpdateStrategy cannot
// play this part: the operator's validation refuses any type but
// RollingUpdate (pkg/controller/installation/validation.go).
const IgnoreAnnotation = "unsupported.operator.tigera.io/ignore"

// HoldAnnotation marks the Installation while winready holds calico-node;
// its value is when the hold began. It is written in the same patch as the
// held changes and removed after the hold: that removal is an Installation
// change, which the operator reconciles at once (it watches the Installation
// without a predicate), while removing IgnoreAnnotation alone changes no
// DaemonSet generation and wakes nothing (its DaemonSet watch passes only
// generation changes).
const HoldAnnotation = "winready.io/calico-node-held"

// PathHold is the JSON pointer of HoldAnnotation in the Installation.
var PathHold = "/metadata/annotations/" + escapePointer(HoldAnnotation)

// Ignored reports whether the Tigera operator leaves ds alone.
func Ignored(ds *appsv1.DaemonSet) bool {
	return ds != nil && ds.Annotations[IgnoreAnnotation] == "true"
}

// HeldSince is when winready began to hold calico-node, from the
// Installation's HoldAnnotation; false when it holds nothing.
func HeldSince(inst *operatorv1.Installation) (time.Time, bool) {
	v, ok := inst.Annotations[HoldAnnotation]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		// Still held, by winready: a value it cannot read counts as long ago.
		return time.Time{}, true
	}
	return t, true
}

// HoldChange is the Installation change that marks the hold, made in the
// patch of the held changes.
func HoldChange(inst *operatorv1.Installation, now time.Time) Change {
	return Change{Object: ObjectInstallation, Pointer: PathHold, Old: OfString(holdValue(inst)),
		New: Of(now.UTC().Format(time.RFC3339))}
}

// ReleaseChange is the Installation change that ends the hold.
func ReleaseChange(inst *operatorv1.Installation) []Change {
	return FieldChange(ObjectInstallation, PathHold, OfString(holdValue(inst)), Value{})
}

func holdValue(inst *operatorv1.Installation) *string {
	if v, ok := inst.Annotations[HoldAnnotation]; ok {
		return &v
	}
	return nil
}

// HoldNode makes the Tigera operator leave calico-node alone. It comes
// before the held changes are written, so whatever the operator rendered
// into calico-node meanwhile is what stays: nothing of the DaemonSet needs to
// hold but that an annotations map created whole replaces none, and the
// DaemonSet controller's status writes never fail the hold. It claims
// calico-node (ClaimLabel) in the same patch.
func HoldNode(ctx context.Context, c client.Client, ds *appsv1.DaemonSet) error {
	var ops []PatchOp
	if ds.Annotations == nil {
		ops = append(ops, TestAbsent("/metadata/annotations"),
			PatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{IgnoreAnnotation: "true"}})
	} else {
		ops = append(ops, PatchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(IgnoreAnnotation), Value: "true"})
	}
	return patchDaemonSet(ctx, c, ds, append(ops, ClaimOps(ds.Labels)...), "holding")
}

// ReleaseNode lets the Tigera operator update calico-node again, guarded by
// the annotation's value, and lifts winready's claim with it: calico-node is
// claimed only while it is held, as the Tigera operator writes it on every
// render.
func ReleaseNode(ctx context.Context, c client.Client, ds *appsv1.DaemonSet) error {
	path := "/metadata/annotations/" + escapePointer(IgnoreAnnotation)
	ops := []PatchOp{{Op: "test", Path: path, Value: "true"}, {Op: "remove", Path: path}}
	return patchDaemonSet(ctx, c, ds, append(ops, UnclaimOps(ds.Labels)...), "releasing")
}

func patchDaemonSet(ctx context.Context, c client.Client, ds *appsv1.DaemonSet, ops []PatchOp, what string) error {
	body, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encoding the calico-node patch: %w", err)
	}
	if err := c.Patch(ctx, ds, client.RawPatch(types.JSONPatchType, body)); err != nil {
		if e := classifyPatchError(err); errors.Is(e, ErrGuardFailed) {
			return e
		}
		return fmt.Errorf("%s calico-node (annotation %s): %w", what, IgnoreAnnotation, err)
	}
	return nil
}

// HeldBy reports whether manager's managedFields own calico-node's
// IgnoreAnnotation: the annotation is the one manager wrote, not a person's.
func HeldBy(ds *appsv1.DaemonSet, manager string) bool {
	return slices.Contains(IgnoredBy(ds), manager)
}

// IgnoredBy lists the field managers that own calico-node's
// IgnoreAnnotation, in the order of its managedFields.
func IgnoredBy(ds *appsv1.DaemonSet) []string {
	var out []string
	for _, e := range ds.ManagedFields {
		if e.FieldsV1 == nil || slices.Contains(out, e.Manager) {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) == nil && Owns(fields, "/metadata/annotations/"+escapePointer(IgnoreAnnotation)) {
			out = append(out, e.Manager)
		}
	}
	return out
}

// TyphaDeployment is the Deployment the Tigera operator renders for Typha
// in calico-system, with the services endpoint in its environment like
// calico-node (pkg/render/typha.go).
const TyphaDeployment = "calico-typha"

// TyphaEndpoint is the API server address the Tigera operator last rendered
// into calico-typha; found is false when there is no such Deployment. The
// operator renders Typha and calico-node from the same in-memory copy of the
// services-endpoint ConfigMap, so Typha carrying the ConfigMap's values shows
// that the operator has read them while calico-node is held.
func TyphaEndpoint(ctx context.Context, r client.Reader) (host, port string, found bool, err error) {
	d := &appsv1.Deployment{}
	got, err := getOrNil(ctx, r, client.ObjectKey{Namespace: SystemNamespace, Name: TyphaDeployment}, d)
	if err != nil || got == nil {
		return "", "", false, err
	}
	for _, c := range got.Spec.Template.Spec.Containers {
		if c.Name == TyphaDeployment {
			host, _ = envValue(c.Env, ServiceHostKey)
			port, _ = envValue(c.Env, ServicePortKey)
		}
	}
	return host, port, true, nil
}
