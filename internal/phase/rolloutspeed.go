package phase

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// MaxUnavailableShare is the largest share of calico-node's nodes that
// spec.rollout.maxUnavailable may take the pod network from at once. The
// CRD bounds a percentage by it; a count is bounded here, against the nodes
// calico-node runs on.
const MaxUnavailableShare = 0.25

// RolloutSpeed is calico-node's rolling-update maxUnavailable during the
// rollouts of a migration or a rollback (spec.rollout.maxUnavailable). It is
// not a step: it rides along with the first change that re-renders
// calico-node (Faster), and is put back once every step has settled
// (Restore). Changing the update strategy alone changes no pod template, so
// neither move is a rollout of its own.
type RolloutSpeed struct {
	// Want is the value to roll out with; nil leaves the Installation's.
	Want *intstr.IntOrString
}

// RecordMaxUnavailable records the Installation's maxUnavailable, absent
// included.
func RecordMaxUnavailable(c *calico.Cluster, o *v1alpha1.Originals) {
	v := maxUnavailableOf(c.Installation)
	rec := v1alpha1.OriginalValue{}
	if v.Present {
		rec = v1alpha1.OriginalValue{Present: true, Value: fmt.Sprint(v.V)}
	}
	o.NodeMaxUnavailable = &rec
}

// Faster lists the change that sets maxUnavailable to Want for the rollouts
// to come; none when Want is unset, already holds, no original was recorded
// to put back, calico-node does not roll out by itself (OnDelete), or the
// Installation holds neither the original nor Want: that value is someone
// else's, and stays.
func (s RolloutSpeed) Faster(in Input) []calico.Change {
	inst := in.Cluster.Installation
	if s.Want == nil || in.Originals == nil || in.Originals.NodeMaxUnavailable == nil ||
		inst.Spec.NodeUpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType ||
		!maxUnavailableOf(inst).Equal(recordedMaxUnavailable(in.Originals)) {
		return nil
	}
	return calico.FieldChange(calico.ObjectInstallation, calico.PathNodeMaxUnavailable,
		maxUnavailableOf(inst), valueOfIntOrString(*s.Want))
}

// One node at a time: the canary's pace.
var oneNode = calico.Of(int64(1))

// Canary lists the change that slows the rollout a change is about to cause
// to one node at a time while a canary lasts, made in the same write as
// Faster would be and in its place. ok says whether the canary can run at
// all: the Installation holds the original or Want (not someone else's
// value), calico-node rolls out by itself, and the pace after the canary is
// one the manager may set (Want, or an Installation already at one node,
// since without Want nothing would allow raising it again). No change is
// listed when the Installation already rolls one node at a time.
func (s RolloutSpeed) Canary(in Input) (changes []calico.Change, ok bool) {
	inst := in.Cluster.Installation
	if in.Originals == nil || in.Originals.NodeMaxUnavailable == nil ||
		inst.Spec.NodeUpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return nil, false
	}
	now := maxUnavailableOf(inst)
	if !now.Present || now.Equal(oneNode) {
		return nil, true
	}
	if s.Want == nil || (!now.Equal(recordedMaxUnavailable(in.Originals)) && !now.Equal(valueOfIntOrString(*s.Want))) {
		return nil, false
	}
	return calico.FieldChange(calico.ObjectInstallation, calico.PathNodeMaxUnavailable, now, oneNode), true
}

// AfterCanary lists the change that puts the rollout at Want once a canary
// has passed: from the canary's one node (set, or the operator's default
// when absent), when the Installation still holds it.
func (s RolloutSpeed) AfterCanary(in Input) []calico.Change {
	now := maxUnavailableOf(in.Cluster.Installation)
	if s.Want == nil || (now.Present && !now.Equal(oneNode)) {
		return nil
	}
	want := valueOfIntOrString(*s.Want)
	if want.Equal(oneNode) {
		return nil
	}
	return calico.FieldChange(calico.ObjectInstallation, calico.PathNodeMaxUnavailable, now, want)
}

// recordedMaxUnavailable is the recorded original as the Installation holds it.
func recordedMaxUnavailable(o *v1alpha1.Originals) calico.Value {
	if rec := o.NodeMaxUnavailable; rec.Present {
		return valueOfIntOrString(intstr.Parse(rec.Value))
	}
	return calico.Value{}
}

// Restore lists the change that puts back the recorded maxUnavailable once
// the rollouts are over. ours says whether winready made the current value
// (its field manager owns it): a value someone else set since is theirs and
// stays.
//
// An original wider than the value there is not put back: the manager may
// only slow calico-node's rollouts down outside the spec's own pace
// (winready-manager-installation-spec), so that a stolen token cannot speed
// them up by calling any value an original. The slower pace stays.
func (s RolloutSpeed) Restore(in Input, ours bool) []calico.Change {
	if !ours || in.Originals == nil || in.Originals.NodeMaxUnavailable == nil {
		return nil
	}
	now, rec := maxUnavailableOf(in.Cluster.Installation), recordedMaxUnavailable(in.Originals)
	if !rec.Equal(now) && !NoWider(rec, now) {
		return nil
	}
	return calico.FieldChange(calico.ObjectInstallation, calico.PathNodeMaxUnavailable, now, rec)
}

// NoWider says whether maxUnavailable v takes the pod network from no more
// nodes than the value than does: absent (the operator's default of one node), one node, or
// a value of the same unit and not larger. It is the admission policy's rule
// for a value the spec does not name.
func NoWider(v, than calico.Value) bool {
	if !v.Present {
		return true
	}
	if n, ok := v.V.(int64); ok && n == 1 {
		return true
	}
	if !than.Present {
		return false
	}
	switch a := v.V.(type) {
	case int64:
		b, ok := than.V.(int64)
		return ok && a <= b
	case string:
		b, ok := than.V.(string)
		pa, errA := intstr.GetScaledValueFromIntOrPercent(ptr.To(intstr.FromString(a)), 100, false)
		pb, errB := intstr.GetScaledValueFromIntOrPercent(ptr.To(intstr.FromString(b)), 100, false)
		return ok && errA == nil && errB == nil && pa <= pb
	}
	return false
}

// OverlayPace names Installation overlay's spec.nodeUpdateStrategy while it
// takes the place of the maxUnavailable winready set in Installation default
// for the rollouts: the Tigera operator renders calico-node with the
// overlay's whole update strategy. Someone else's pace is left alone, as a
// maxUnavailable another manager sets in default is (Faster, Restore), and
// only said; "" when the overlay does not change the pace.
func (s RolloutSpeed) OverlayPace(in Input) string {
	if s.Want == nil || in.Cluster == nil || in.Cluster.Overlay == nil ||
		reflect.ValueOf(in.Cluster.Overlay.Spec.NodeUpdateStrategy).IsZero() {
		return ""
	}
	want := valueOfIntOrString(*s.Want)
	if !maxUnavailableOf(in.Cluster.Installation).Equal(want) {
		return ""
	}
	got := maxUnavailableOf(in.Effective().Cluster.Installation)
	if got.Equal(want) {
		return ""
	}
	strategy, _ := json.Marshal(in.Cluster.Overlay.Spec.NodeUpdateStrategy)
	return fmt.Sprintf("Installation overlay sets spec.nodeUpdateStrategy: %s, which replaces Installation default's: "+
		"calico-node rolls out with maxUnavailable %s, not %s from spec.rollout.maxUnavailable; remove it from the overlay "+
		"for the faster rollout", strategy, got, want)
}

// Check refuses a count of nodes above MaxUnavailableShare of the nodes
// calico-node runs on (a percentage is bounded by the CRD).
func (s RolloutSpeed) Check(in Input) error {
	if s.Want == nil || s.Want.Type != intstr.Int || in.Cluster.Node == nil {
		return nil
	}
	nodes := int(in.Cluster.Node.Status.DesiredNumberScheduled)
	bound := max(1, int(math.Ceil(float64(nodes)*MaxUnavailableShare)))
	if s.Want.IntValue() > bound {
		return fmt.Errorf("spec.rollout.maxUnavailable %d is more than a quarter of the %d nodes calico-node runs on: "+
			"at most %d (or a percentage up to 25%%) keeps the pod network on three quarters of the nodes during a rollout; "+
			"lower it, or remove it to roll out as the Installation says", s.Want.IntValue(), nodes, bound)
	}
	return nil
}

// maxUnavailableOf is the Installation's calico-node maxUnavailable.
func maxUnavailableOf(inst *operatorv1.Installation) calico.Value {
	ru := inst.Spec.NodeUpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		return calico.Value{}
	}
	return valueOfIntOrString(*ru.MaxUnavailable)
}

// valueOfIntOrString is a count as a number and a percentage as a string,
// as JSON carries them.
func valueOfIntOrString(v intstr.IntOrString) calico.Value {
	if v.Type == intstr.Int {
		return calico.Of(int64(v.IntVal))
	}
	return calico.Of(v.StrVal)
}
