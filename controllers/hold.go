package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/metrics"
	"github.com/winready/winready/internal/phase"
)

// HoldMax bounds a hold of calico-node whose evidence does not come (a
// Tigera operator that is down or never reaches its render): calico-node is
// then released anyway and renders whatever the operator reads at that
// moment. A running operator shows the evidence within its 5-second status
// tick.
const HoldMax = 5 * time.Minute

// holdLook is how soon a hold's evidence is looked at again when no watched
// object changes: the Tigera operator's status tick.
const holdLook = 5 * time.Second

// needsHold says whether a write spans the Installation and the
// services-endpoint ConfigMap. Two objects cannot be written at once, and the
// Tigera operator reads them at different moments of one reconcile, so the
// write goes under a hold of calico-node (calico.IgnoreAnnotation). A write
// of one object is rendered whole by the first reconcile that reads it and
// needs none.
func (b batched) needsHold() bool {
	var inst, cm bool
	for _, c := range calico.Due(b.changes) {
		switch c.Object {
		case calico.ObjectInstallation:
			inst = true
		case calico.ObjectServicesEndpoint:
			cm = true
		}
	}
	return inst && cm
}

// calicoNodeHold is the rider of the hold: before a write that spans the
// Installation and the services endpoint, calico-node is held; holdRelease
// ends the hold once the Tigera operator has read every held change.
type calicoNodeHold struct{}

func (calicoNodeHold) join(*scope, *stepTurn) {}

func (calicoNodeHold) prepare(ctx context.Context, w walk, s *scope, t *stepTurn) error {
	return w.holdCalicoNode(ctx, s, t.in, &t.batch)
}

func (calicoNodeHold) prove(context.Context, walk, *scope, *stepTurn) Outcome {
	return done()
}

func (calicoNodeHold) plan(_ *scope, _ phase.Input, plan []v1alpha1.PlannedChange) []v1alpha1.PlannedChange {
	return plan
}

// holdCalicoNode makes the Tigera operator leave calico-node alone before the write of
// b, and adds the mark of the hold to b's Installation patch. calico-node
// absent (the operator creates it whole, from what it reads then) or held by
// someone else needs no hold of winready's.
func (w walk) holdCalicoNode(ctx context.Context, s *scope, in phase.Input, b *batched) error {
	if !b.needsHold() || in.Cluster.Node == nil {
		return nil
	}
	ds := in.Cluster.Node
	if calico.Ignored(ds) {
		// The cache keeps no managedFields: who set the annotation is read live.
		live, err := calico.ReadDaemonSet(ctx, w.APIReader, calico.NodeDaemonSet)
		if err != nil || live == nil || !calico.HeldBy(live, FieldOwner) {
			// A person's hold: the operator renders nothing into calico-node
			// until they lift it, and then renders it whole.
			return err
		}
	} else if err := calico.HoldNode(ctx, w.Client, ds); err != nil {
		return err
	}
	b.changes = append(b.changes, calico.HoldChange(in.Cluster.Installation, s.now))
	log.FromContext(ctx).Info("holding calico-node while the Tigera operator reads the changes")
	return nil
}

// holdRelease ends winready's hold of calico-node once the Tigera operator
// has read every held change, whatever the direction, the pause or a stall:
// the held changes are written, and calico-node must not stay frozen. It runs
// before the migration's or the rollback's sub-reconcilers, so a restarted
// manager finds and ends a hold it left. While the hold goes on it is done,
// and asks to look again after the operator's status tick.
type holdRelease struct{ *Reconciler }

func (r holdRelease) reconcile(ctx context.Context, s *scope) Outcome {
	since, marked := calico.HeldSince(s.inst)
	ds, err := calico.ReadDaemonSet(ctx, r.Client, calico.NodeDaemonSet)
	if err != nil {
		return failed(err)
	}
	var live *appsv1.DaemonSet
	if !calico.Ignored(ds) {
		metrics.RecordCalicoNodeIgnored(false, false)
		meta.RemoveStatusCondition(&s.wr.Status.Conditions, conditions.CalicoNodeManaged)
		if !marked {
			return done()
		}
	} else {
		var o Outcome
		if live, o = r.ignoredBy(ctx, s); !o.Done() {
			return o
		}
	}
	if marked {
		read, why, err := r.operatorRead(ctx, s.inst)
		if err != nil {
			return failed(err)
		}
		if !read {
			if left := HoldMax - s.now.Sub(since); left > 0 {
				log.FromContext(ctx).V(1).Info("holding calico-node", "until", why)
				// The TigeraStatus and Installation watches wake the reconciler;
				// calico-typha is not watched (winready may only get it by
				// name), so look again after one status tick of the operator.
				return Outcome{After: min(left, holdLook)}
			}
			s.note(corev1.EventTypeWarning, conditions.ReasonCalicoNodeReleased, "Rollout",
				"calico-node released after %s without the evidence awaited (%s): it renders whatever the Tigera operator reads now", HoldMax, why)
		}
	}
	if err := r.releaseNode(ctx, s.wr.Status.Originals, live); err != nil {
		return failed(err)
	}
	if marked {
		// The Installation changes, so the operator reconciles now and
		// renders calico-node once, from the held changes together.
		if err := calico.Apply(ctx, r.Client, &calico.Cluster{Installation: s.inst}, calico.ReleaseChange(s.inst)); err != nil {
			return failed(fmt.Errorf("unmarking the hold of calico-node: %w", err))
		}
		log.FromContext(ctx).Info("released calico-node: the Tigera operator renders the held changes in one template")
	}
	return done()
}

// ignoredBy looks at who set calico-node's ignore annotation, and returns
// calico-node as read past the cache (the cache keeps no managedFields, which
// say who set it). winready's own is its hold: kept while the Installation
// carries the hold's mark, and otherwise left over (a write of the mark that
// failed, a manager that stopped midway, or winready's token used by someone
// else) and removed by the caller (releaseNode). Anyone else's is named in
// the status and the metric, and left: a person may hold calico-node on
// purpose, and only they know until when.
func (r holdRelease) ignoredBy(ctx context.Context, s *scope) (*appsv1.DaemonSet, Outcome) {
	live, err := calico.ReadDaemonSet(ctx, r.APIReader, calico.NodeDaemonSet)
	if err != nil {
		return nil, failed(err)
	}
	if live == nil || !calico.Ignored(live) {
		return live, done()
	}
	by := calico.IgnoredBy(live)
	ours := slices.Contains(by, FieldOwner)
	metrics.RecordCalicoNodeIgnored(true, ours)
	if ours {
		meta.RemoveStatusCondition(&s.wr.Status.Conditions, conditions.CalicoNodeManaged)
		return live, done()
	}
	who := "a field manager that is not winready"
	if len(by) > 0 {
		who = "field manager " + strings.Join(by, ", ")
	}
	s.set(conditions.CalicoNodeManaged, metav1.ConditionFalse, conditions.ReasonCalicoNodeIgnored, fmt.Sprintf(
		"calico-node carries %s: \"true\", set by %s: the Tigera operator renders nothing into it, so no change of the "+
			"migration (nor a Calico upgrade) reaches the nodes; remove it with kubectl annotate daemonset -n %s %s %s- "+
			"once whoever set it is done", calico.IgnoreAnnotation, who, calico.SystemNamespace, calico.NodeDaemonSet, calico.IgnoreAnnotation))
	return live, done()
}

// releaseNode removes calico-node's ignore annotation when winready set it:
// live (calico-node read past the cache, nil when not read) carries it under
// winready's field manager, and the originals do not record it as there
// before the migration.
func (r *Reconciler) releaseNode(ctx context.Context, o *v1alpha1.Originals, live *appsv1.DaemonSet) error {
	if o != nil && o.NodeIgnored != nil && o.NodeIgnored.Present {
		return nil
	}
	if live == nil || !calico.Ignored(live) || !calico.HeldBy(live, FieldOwner) {
		return nil
	}
	return calico.ReleaseNode(ctx, r.Client, live)
}

// releaseOrphanedHold ends a hold at once when the WindowsReadiness that
// made it is gone, and keeps the metric of calico-node's ignore annotation,
// which no status shows then.
func (r *Reconciler) releaseOrphanedHold(ctx context.Context) error {
	inst, err := calico.GetInstallation(ctx, r.Client)
	if err != nil || inst == nil {
		return err
	}
	if err := r.releaseOrphanedNode(ctx); err != nil {
		return err
	}
	if _, marked := calico.HeldSince(inst); !marked {
		return nil
	}
	if err := calico.ReleasePatch(inst).Apply(ctx, r.Client, inst); err != nil {
		return fmt.Errorf("unmarking the hold of calico-node: %w", err)
	}
	return nil
}

// releaseOrphanedNode removes calico-node's ignore annotation when winready
// set it, and records who holds calico-node in the metric. calico-node is
// read past the cache only when the cache shows it ignored.
func (r *Reconciler) releaseOrphanedNode(ctx context.Context) error {
	ds, err := calico.ReadDaemonSet(ctx, r.Client, calico.NodeDaemonSet)
	if err != nil || !calico.Ignored(ds) {
		metrics.RecordCalicoNodeIgnored(false, false)
		return err
	}
	live, err := calico.ReadDaemonSet(ctx, r.APIReader, calico.NodeDaemonSet)
	if err != nil {
		return err
	}
	ignored := live != nil && calico.Ignored(live)
	ours := ignored && calico.HeldBy(live, FieldOwner)
	if ours {
		if err := r.releaseNode(ctx, nil, live); err != nil {
			return err
		}
		ignored = false
	}
	metrics.RecordCalicoNodeIgnored(ignored, false)
	return nil
}

// recordNodeIgnored records calico-node's ignore annotation before the
// migration, absent included.
func recordNodeIgnored(c *calico.Cluster, o *v1alpha1.Originals) {
	rec := v1alpha1.OriginalValue{}
	if c.Node != nil {
		if v, ok := c.Node.Annotations[calico.IgnoreAnnotation]; ok {
			rec = v1alpha1.OriginalValue{Present: true, Value: v}
		}
	}
	o.NodeIgnored = &rec
}

// operatorRead says whether the Tigera operator has read the held changes,
// and what is awaited if not. The Installation: TigeraStatus calico carries
// the generation of the last reconcile that finished (SetMetaData is
// deferred to its end), and reconciles run one at a time, so any reconcile
// from now on starts from that Installation or a later one. The status
// ticker writes it up to 5 s later; sooner, a reconcile that ends with all
// available writes the spec it read into status.computed as its last act,
// and a computed equal to the spec says the same. The ConfigMap:
// the operator keeps one in-memory copy of it and renders calico-typha from
// the same copy as calico-node, so Typha carrying its values shows the copy
// is current (and a copy never goes back to older values: the operator reads
// it from a cache that only moves forward).
func (r holdRelease) operatorRead(ctx context.Context, inst *operatorv1.Installation) (bool, string, error) {
	h, err := calico.ReadHealth(ctx, r.Client, calico.StatusCalico)
	if err != nil {
		return false, "", err
	}
	computed := inst.Status.Computed != nil && equality.Semantic.DeepEqual(*inst.Status.Computed, inst.Spec)
	if h.ObservedGeneration < inst.Generation && !computed {
		return false, fmt.Sprintf("TigeraStatus calico to observe Installation generation %d (at %d)", inst.Generation, h.ObservedGeneration), nil
	}
	if h.Degraded {
		// An Installation the operator refuses renders nothing at all; once
		// it is fixed, the next reconcile reads every held change afresh.
		return true, "", nil
	}
	cm, err := calico.GetServicesEndpoint(ctx, r.Client)
	if err != nil || cm == nil {
		return err == nil, "", err
	}
	host, port, found, err := calico.TyphaEndpoint(ctx, r.APIReader)
	if err != nil || !found {
		return err == nil, "", err
	}
	if want := [2]string{cm.Data[calico.ServiceHostKey], cm.Data[calico.ServicePortKey]}; [2]string{host, port} != want {
		return false, fmt.Sprintf("the Tigera operator to render calico-typha with %s=%q %s=%q (is %q %q)",
			calico.ServiceHostKey, want[0], calico.ServicePortKey, want[1], host, port), nil
	}
	return true, "", nil
}
