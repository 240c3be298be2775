package calicosim

import (
	"context"
	"fmt"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
)

// Settled reports whether the simulated cluster is at rest: the Installation's status.computed equals its spec
// (merged with the overlay's, when there is one)
// (the operator writes it only after an available reconcile of that spec), TigeraStatus calico and ippools are
// Available, not Progressing and not Degraded at the Installation's current generation, and every DaemonSet in
// calico-system is rolled out. When it is not, the string says what is still moving.
//
// A cluster seeded with Cluster.AsWritten is not at rest right after Seed even though its seeded TigeraStatus
// objects say Available at generation 1: the simulator is about to write the operator's defaults. Settled sees
// through that, because status.computed does not match the undefaulted spec.
func Settled(ctx context.Context, c client.Reader) (bool, string, error) {
	inst := &operatorv1.Installation{}
	if err := c.Get(ctx, types.NamespacedName{Name: installationName}, inst); err != nil {
		return false, "", err
	}
	// With an overlay, status.computed is the merged spec.
	computed := inst.Spec
	overlay := &operatorv1.Installation{}
	if err := c.Get(ctx, types.NamespacedName{Name: overlayName}, overlay); err == nil {
		computed = calico.MergeOverlay(inst.Spec, overlay.Spec)
	} else if client.IgnoreNotFound(err) != nil {
		return false, "", err
	}
	if !equality.Semantic.DeepEqual(inst.Status.Computed, &computed) {
		return false, fmt.Sprintf("Installation generation %d is not yet computed", inst.Generation), nil
	}
	for _, name := range []string{StatusCalico, StatusIPPools} {
		ts := &operatorv1.TigeraStatus{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, ts); err != nil {
			return false, "", client.IgnoreNotFound(err)
		}
		want := map[operatorv1.StatusConditionType]operatorv1.ConditionStatus{
			operatorv1.ComponentAvailable:   operatorv1.ConditionTrue,
			operatorv1.ComponentProgressing: operatorv1.ConditionFalse,
			operatorv1.ComponentDegraded:    operatorv1.ConditionFalse,
		}
		for _, cond := range ts.Status.Conditions {
			if s, ok := want[cond.Type]; ok && s == cond.Status && cond.ObservedGeneration == inst.Generation {
				delete(want, cond.Type)
			}
		}
		if len(want) > 0 {
			return false, fmt.Sprintf("TigeraStatus %s is not Available at generation %d: %+v", name, inst.Generation, ts.Status.Conditions), nil
		}
	}
	list := &appsv1.DaemonSetList{}
	if err := c.List(ctx, list, client.InNamespace(calicoNamespace)); err != nil {
		return false, "", err
	}
	for _, ds := range list.Items {
		if !RolledOut(&ds) {
			return false, fmt.Sprintf("DaemonSet %s/%s is rolling out: %+v", ds.Namespace, ds.Name, ds.Status), nil
		}
	}
	return true, "", nil
}

// WaitSettled polls Settled until it holds or timeout passes.
func WaitSettled(ctx context.Context, c client.Reader, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, why, err := Settled(ctx, c)
		last = why
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("simulated cluster did not settle (%s): %w", last, err)
	}
	return nil
}

// RolledOut is the rollout-done rule of calico-facts.md: the DaemonSet controller has seen the current template
// and every desired node runs it and is available.
func RolledOut(ds *appsv1.DaemonSet) bool {
	st := ds.Status
	return st.ObservedGeneration >= ds.Generation &&
		st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
		st.NumberAvailable == st.DesiredNumberScheduled &&
		st.NumberUnavailable == 0
}
