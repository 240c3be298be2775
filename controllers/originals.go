package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
	"github.com/winready/winready/internal/record"
)

// originals makes the status and the durable record agree on the originals
// before any change. The record is written before the first change and wins:
// it outlives the WindowsReadiness, whose status may be lost (a delete and
// re-apply) or stale (a restore from a backup).
type originals struct {
	*Reconciler
	steps []phase.Step
}

func (r originals) reconcile(ctx context.Context, s *scope) Outcome {
	ns := r.opts.Namespace
	saved, err := r.loadRecord(ctx, s)
	if err != nil {
		return failed(err)
	}
	switch {
	case saved != nil && s.wr.Status.Originals == nil:
		s.wr.Status.Originals = saved
		s.steps().reset(r.steps)
		msg := fmt.Sprintf("read back from ConfigMap %s/%s, recorded at %s before the first change; "+
			"the migration goes on from what the cluster shows", ns, record.Name, saved.RecordedAt.UTC().Format(time.RFC3339))
		s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredRecord, msg)
		s.note(corev1.EventTypeNormal, conditions.ReasonRestoredRecord, "Record", "the originals were %s", msg)
	case saved != nil && !equality.Semantic.DeepEqual(saved, s.wr.Status.Originals):
		s.wr.Status.Originals = saved
		msg := fmt.Sprintf("status.originals disagreed with ConfigMap %s/%s, which was written before the first change and is used", ns, record.Name)
		s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredRecord, msg)
		s.note(corev1.EventTypeWarning, conditions.ReasonOriginalsMismatch, "Record", "%s", msg)
	case saved == nil && s.wr.Status.Originals != nil:
		// Recorded by a winready that kept them in the status only.
		if err := r.saveRecord(ctx, s, s.wr.Status.Originals); err != nil {
			return failed(err)
		}
	case saved == nil:
		return r.record(ctx, s)
	}
	return done()
}

// record records the values the migration will change into the durable
// record first, then the status, before the first change.
func (r originals) record(ctx context.Context, s *scope) Outcome {
	c := &calico.Cluster{Installation: s.inst, Overlay: s.calico.overlay}
	o := &v1alpha1.Originals{RecordedAt: metav1.NewTime(s.now.Truncate(time.Second))}
	for _, step := range r.steps {
		if err := step.Read(ctx, r.readers(), c); err != nil {
			return failed(fmt.Errorf("recording originals of %s: %w", step.Name(), err))
		}
		step.Record(c, o)
	}
	phase.RecordMaxUnavailable(c, o)
	o.Overlay = record.Overlay(c.Overlay)
	recordNodeIgnored(c, o)
	ns := r.opts.Namespace
	if err := r.saveRecord(ctx, s, o); err != nil {
		return failed(err)
	}
	s.wr.Status.Originals = o
	s.steps().reset(r.steps)
	msg := fmt.Sprintf("recorded in the status and in ConfigMap %s/%s before the first change", ns, record.Name)
	if migrated := record.Migrated(o); len(migrated) > 0 {
		msg = fmt.Sprintf("%s; the cluster already held %s and no earlier record exists, so a rollback keeps those values",
			msg, strings.Join(migrated, ", "))
		s.note(corev1.EventTypeWarning, conditions.ReasonOriginalsMismatch, "Record", "%s", msg)
	}
	s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRecorded, msg)
	if err := r.checkpoint(ctx, s, "the first change"); err != nil {
		return failed(err)
	}
	s.note(corev1.EventTypeNormal, conditions.ReasonOriginalsWritten, "Record", "recorded the values the migration will change")
	return done()
}

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
