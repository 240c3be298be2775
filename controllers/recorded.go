package controllers

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/record"
)

// recordedOriginals reads the originals the rollback restores: the durable
// record wins over the status, as it outlives a deleted and re-applied
// WindowsReadiness. With none, there is nothing to roll back; with one that
// lacks a value, the rollback stops before its first change.
type recordedOriginals struct{ *Reconciler }

func (r recordedOriginals) reconcile(ctx context.Context, s *scope) Outcome {
	ns := r.opts.Namespace
	saved, err := r.loadRecord(ctx, s)
	if err != nil {
		return failed(err)
	}
	if saved != nil && !equality.Semantic.DeepEqual(saved, s.wr.Status.Originals) {
		s.wr.Status.Originals = saved
		s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredRecord,
			fmt.Sprintf("read back from ConfigMap %s/%s, recorded before the first change", ns, record.Name))
	}
	if s.wr.Status.Originals == nil {
		// Either a finished rollback cleared them, or no change was ever made.
		if ready := conditionOf(s, conditions.Ready); ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == conditions.ReasonRolledBack {
			return stop(conditions.ReasonRolledBack, "%s", ready.Message)
		}
		return stop(conditions.ReasonNothingToRollBack, "nothing to roll back: the migration changed nothing")
	}
	// A rollback never restores a value it does not know.
	if unknown := record.Unknown(s.wr.Status.Originals, ns); len(unknown) > 0 {
		return stop(conditions.ReasonOriginalsIncomplete,
			"the rollback stopped before its first change: the originals, recorded by an earlier winready, lack %s", strings.Join(unknown, "; "))
	}
	return done()
}
