package calico

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClaimLabel marks every object winready writes outside its status while a
// WindowsReadiness exists: the Installation, the services-endpoint
// ConfigMap, calico-node while it is held, and the record of the originals.
// Admission selects the claim (config/admission): a manager's write must
// leave its object claimed, and a write to a claimed object needs
// WindowsReadiness default, whose spec bounds it. Without a WindowsReadiness
// the manager's token can therefore write none of them. The WindowsReadiness
// carries ClaimFinalizer until winready has lifted every claim, so that no
// claimed object is ever left without the parameter its policies read.
const ClaimLabel = "winready.io/claimed"

// ClaimFinalizer keeps WindowsReadiness default until winready has lifted
// its claims.
const ClaimFinalizer = "winready.io/claims"

// Claimed says whether obj carries winready's claim.
func Claimed(obj client.Object) bool {
	return obj != nil && obj.GetLabels()[ClaimLabel] == "true"
}

// ClaimOps are the JSON patch operations that claim an object with labels:
// none when it is claimed, and a labels map created whole, guarded by a test
// that there is none, when it has no labels.
func ClaimOps(labels map[string]string) []PatchOp {
	switch {
	case labels[ClaimLabel] == "true":
		return nil
	case labels == nil:
		return []PatchOp{TestAbsent("/metadata/labels"),
			{Op: "add", Path: "/metadata/labels", Value: map[string]string{ClaimLabel: "true"}}}
	default:
		return []PatchOp{{Op: "add", Path: claimPath, Value: "true"}}
	}
}

// UnclaimOps are the operations that lift the claim, guarded by its value.
func UnclaimOps(labels map[string]string) []PatchOp {
	if labels[ClaimLabel] != "true" {
		return nil
	}
	return []PatchOp{{Op: "test", Path: claimPath, Value: "true"}, {Op: "remove", Path: claimPath}}
}

var claimPath = "/metadata/labels/" + escapePointer(ClaimLabel)

// Claim puts winready's claim on obj when it lacks it; obj is updated with
// the server's answer.
func Claim(ctx context.Context, c client.Client, obj client.Object) error {
	return patchClaim(ctx, c, obj, ClaimOps(obj.GetLabels()), "claiming")
}

// Unclaim lifts winready's claim from obj when it carries it; obj is updated
// with the server's answer.
func Unclaim(ctx context.Context, c client.Client, obj client.Object) error {
	return patchClaim(ctx, c, obj, UnclaimOps(obj.GetLabels()), "lifting the claim of")
}

func patchClaim(ctx context.Context, c client.Client, obj client.Object, ops []PatchOp, what string) error {
	if len(ops) == 0 {
		return nil
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encoding the claim patch: %w", err)
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, body)); err != nil {
		if e := classifyPatchError(err); errors.Is(e, ErrGuardFailed) {
			return e
		}
		return fmt.Errorf("%s %s %s: %w", what, kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// kindOf names obj's kind for an error, from its Go type when the object
// carries no type meta.
func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", obj)
}
