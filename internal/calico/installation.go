package calico

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	operatorv1 "github.com/tigera/operator/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrGuardFailed means the Installation changed between read and patch: a
// guard did not hold. The caller re-reads and tries again; it is not a failure.
var ErrGuardFailed = errors.New("installation changed since it was read")

// PatchOp is one RFC 6902 operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Patch is a guarded JSON patch of the Installation. Each change is preceded
// by a test of the value it replaces; a change of a field of the spec that is
// absent is guarded by the object's generation, which only a change of the
// spec moves: the Tigera operator's status writes and another client's
// labels or annotations never fail it. A map of the metadata created whole
// is guarded by a test that it is absent (a test without a value holds for a
// missing member), so that nothing someone added meanwhile is replaced.
type Patch struct {
	ops          []PatchOp
	generational bool
}

// TestAbsent is the operation that holds only while nothing is at path.
func TestAbsent(path string) PatchOp { return PatchOp{Op: "test", Path: path} }

// Set sets the field at path. old is the value read; nil means absent.
func (p *Patch) Set(path string, old, value any) *Patch {
	if isAbsent(old) {
		if strings.HasPrefix(path, "/spec/") {
			p.generational = true
		}
		p.ops = append(p.ops, PatchOp{Op: "add", Path: path, Value: value})
		return p
	}
	p.ops = append(p.ops,
		PatchOp{Op: "test", Path: path, Value: old},
		PatchOp{Op: "replace", Path: path, Value: value})
	return p
}

// Unset removes the field at path, whose value read was old. Removing an
// absent field does nothing.
func (p *Patch) Unset(path string, old any) *Patch {
	if isAbsent(old) {
		return p
	}
	p.ops = append(p.ops,
		PatchOp{Op: "test", Path: path, Value: old},
		PatchOp{Op: "remove", Path: path})
	return p
}

// Remove removes a field of the spec that is present, guarded by the
// generation: for structured values a test of the whole value would break on
// fields a newer Tigera operator adds.
func (p *Patch) Remove(path string) *Patch {
	p.generational = true
	p.ops = append(p.ops, PatchOp{Op: "remove", Path: path})
	return p
}

// Test adds a guard on a value the patch relies on without changing it.
func (p *Patch) Test(path string, value any) *Patch {
	p.ops = append(p.ops, PatchOp{Op: "test", Path: path, Value: value})
	return p
}

// Empty is true when the patch changes nothing.
func (p *Patch) Empty() bool {
	for _, op := range p.ops {
		if op.Op != "test" {
			return false
		}
	}
	return true
}

// Ops returns the operations as sent to the Installation as read, the
// generation's guard first when the patch needs it.
func (p *Patch) Ops(inst *operatorv1.Installation) []PatchOp {
	if !p.generational {
		return p.ops
	}
	return append([]PatchOp{{Op: "test", Path: "/metadata/generation", Value: inst.Generation}}, p.ops...)
}

// Apply sends the patch. inst is updated with the server's answer. A guard
// that did not hold returns ErrGuardFailed.
func (p *Patch) Apply(ctx context.Context, c client.Client, inst *operatorv1.Installation) error {
	if p.Empty() {
		return nil
	}
	body, err := json.Marshal(p.Ops(inst))
	if err != nil {
		return fmt.Errorf("encoding installation patch: %w", err)
	}
	if err := c.Patch(ctx, inst, client.RawPatch(types.JSONPatchType, body)); err != nil {
		return classifyPatchError(err)
	}
	return nil
}

// classifyPatchError tells a guard that did not hold (a conflict, or a failed
// test operation) from any other refusal, which is a real error: an
// Installation the Tigera operator's validation rejects must not be retried
// as a lost race.
func classifyPatchError(err error) error {
	if apierrors.IsConflict(err) || isTestFailure(err) {
		return fmt.Errorf("%w: %w", ErrGuardFailed, err)
	}
	return fmt.Errorf("patching installation: %w", err)
}

// isTestFailure recognises the apiserver's answer to a JSON patch that does
// not apply to the object as it is now: a failed "test" operation, or a path
// that is gone. The apiserver answers 422 Invalid with a generic message and
// no field causes (the JSON patch library's own message, "testing value ...
// failed", is dropped on the way); a rejection by validation also answers 422
// Invalid, but names the fields at fault in its causes.
func isTestFailure(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	st := status.Status()
	if st.Code != http.StatusUnprocessableEntity {
		return false
	}
	if strings.Contains(st.Message, "testing value") {
		return true
	}
	return st.Reason == metav1.StatusReasonInvalid && (st.Details == nil || len(st.Details.Causes) == 0) &&
		strings.HasPrefix(st.Message, "the server rejected our request due to an error in our request")
}

func isAbsent(v any) bool {
	if v == nil {
		return true
	}
	switch t := v.(type) {
	case *string:
		return t == nil
	case []string:
		return t == nil
	}
	return false
}

// GetInstallation reads Installation "default". It returns nil, nil when the
// cluster has none.
func GetInstallation(ctx context.Context, r client.Reader) (*operatorv1.Installation, error) {
	return getOrNil(ctx, r, client.ObjectKey{Name: InstallationName}, &operatorv1.Installation{})
}

// BGP returns spec.calicoNetwork.bgp, or nil when absent.
func BGP(inst *operatorv1.Installation) *string {
	if cn := inst.Spec.CalicoNetwork; cn != nil && cn.BGP != nil {
		s := string(*cn.BGP)
		return &s
	}
	return nil
}

// WindowsDataplane returns spec.calicoNetwork.windowsDataplane, or nil.
func WindowsDataplane(inst *operatorv1.Installation) *string {
	if cn := inst.Spec.CalicoNetwork; cn != nil && cn.WindowsDataplane != nil {
		s := string(*cn.WindowsDataplane)
		return &s
	}
	return nil
}

// IPPools returns the Installation's pools.
func IPPools(inst *operatorv1.Installation) []operatorv1.IPPool {
	if cn := inst.Spec.CalicoNetwork; cn != nil {
		return cn.IPPools
	}
	return nil
}

// Deref returns the string a field holds, or "" when absent.
func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// EnsureCalicoNetwork adds an empty spec.calicoNetwork to p when the
// Installation has none, so that paths below it exist.
func EnsureCalicoNetwork(p *Patch, inst *operatorv1.Installation) {
	if inst.Spec.CalicoNetwork == nil {
		p.generational = true
		p.ops = append(p.ops, PatchOp{Op: "add", Path: "/spec/calicoNetwork", Value: map[string]any{}})
	}
}

// EnsureRollingUpdate adds an empty spec.nodeUpdateStrategy.rollingUpdate to
// p when the Installation has none, keeping the strategy's type, so that
// maxUnavailable below it can be set.
func EnsureRollingUpdate(p *Patch, inst *operatorv1.Installation) {
	if s := inst.Spec.NodeUpdateStrategy; s.RollingUpdate == nil {
		strategy := map[string]any{"rollingUpdate": map[string]any{}}
		if s.Type != "" {
			strategy["type"] = string(s.Type)
		}
		p.generational = true
		p.ops = append(p.ops, PatchOp{Op: "add", Path: "/spec/nodeUpdateStrategy", Value: strategy})
	}
}

// JSON pointers of the fields winready changes.
const (
	PathBGP              = "/spec/calicoNetwork/bgp"
	PathWindowsDataplane = "/spec/calicoNetwork/windowsDataplane"
	PathServiceCIDRs     = "/spec/serviceCIDRs"
	// PathNodeMaxUnavailable is calico-node's rolling-update maxUnavailable.
	PathNodeMaxUnavailable = "/spec/nodeUpdateStrategy/rollingUpdate/maxUnavailable"
	PathWindowsNodes       = "/spec/windowsNodes"
	// PathStrictAffinity is the IPAM configuration's field.
	PathStrictAffinity = "/spec/strictAffinity"
)

// DataPointer is the JSON pointer of a ConfigMap key.
func DataPointer(key string) string { return "/data/" + key }

// PoolPath is the JSON pointer of a field of the i-th Installation pool.
func PoolPath(i int, field string) string {
	return fmt.Sprintf("/spec/calicoNetwork/ipPools/%d/%s", i, field)
}

// escapePointer escapes s as one token of a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
