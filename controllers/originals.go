package controllers

import (
	"context"
	"fmt"
	"slices"
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

// readRecord reads the durable record of the originals and shows in the
// status the originals this pass goes on from: the record's, when this
// WindowsReadiness wrote it or a person acknowledged it. The originals the
// status held are never taken as they are: the manager's token may write the
// status, so they prove nothing. When no record exists they stay on show,
// unrecorded, until a person decides (foreignRecord): a winready from before
// the record kept the originals in the status alone, and dropping them would
// lose what a rollback needs. The record outlives the WindowsReadiness and is
// written before the first change.
type readRecord struct{ *Reconciler }

func (r readRecord) reconcile(ctx context.Context, s *scope) Outcome {
	rec, err := r.loadRecord(ctx, s)
	if err != nil {
		return failed(err)
	}
	s.record = rec
	shown := s.wr.Status.Originals
	s.wr.Status.Originals = nil
	switch {
	case s.adopted():
		s.wr.Status.Originals = rec.Originals.DeepCopy()
	case rec == nil:
		s.wr.Status.Originals = shown
	}
	return done()
}

// unrecorded says whether the status shows originals that no record holds.
func (s *scope) unrecorded() bool {
	return s.record == nil && s.wr.Status.Originals != nil
}

// adopted says whether the pass goes on from the record: there is one, and
// this WindowsReadiness's migration wrote it or a person acknowledged it.
func (s *scope) adopted() bool {
	return s.record != nil && (s.record.WrittenBy(s.wr.UID) || foreignRecordAcknowledged(s))
}

func foreignRecordAcknowledged(s *scope) bool {
	return slices.Contains(s.wr.Spec.Preflight.Acknowledge, v1alpha1.AcknowledgeForeignRecord)
}

// foreignRecord stops a migration or a rollback, before any change, on a
// record this WindowsReadiness did not write and no person acknowledged.
// Such a record may be one a deleted WindowsReadiness left, or one planted
// while none existed (the manager's token may create the record then): its
// values would be what the migration keeps and what the rollback writes
// back, so a person reads them first.
type foreignRecord struct{ *Reconciler }

func (r foreignRecord) reconcile(ctx context.Context, s *scope) Outcome {
	if s.unrecorded() {
		return r.unrecordedOriginals(ctx, s)
	}
	rec := s.record
	if rec == nil || s.adopted() {
		return done()
	}
	who := "it names no WindowsReadiness (written by an earlier winready, or not by winready)"
	if rec.WrittenFor != "" {
		who = fmt.Sprintf("it names WindowsReadiness UID %s, not this one's (%s)", rec.WrittenFor, s.wr.UID)
	}
	msg := fmt.Sprintf("nothing was changed: ConfigMap %s/%s (created %s) was not written by this WindowsReadiness: %s. It holds: %s. "+
		"If these are the cluster's values from before the first change, add %s to spec.preflight.acknowledge; "+
		"if not, delete or correct the ConfigMap, then kubectl winready retry (a new value of annotation %s)",
		r.opts.Namespace, record.Name, rec.Created.UTC().Format(time.RFC3339), who, record.Holds(rec.Originals),
		v1alpha1.AcknowledgeForeignRecord, v1alpha1.RetryAnnotation)
	s.set(conditions.OriginalsRecorded, metav1.ConditionFalse, conditions.ReasonForeignRecord, msg)
	return stop(conditions.ReasonForeignRecord, "%s", msg)
}

// unrecordedOriginals stops a migration or a rollback, before any change, on
// originals the status shows and no record holds: a winready from before the
// record kept them there alone (an upgrade in the middle of a migration), or
// another hand wrote them. Acknowledged in a migration, they become the
// record of this WindowsReadiness, and the migration goes on from them.
// Cleared by a person, the migration records the cluster as it is then.
func (r foreignRecord) unrecordedOriginals(ctx context.Context, s *scope) Outcome {
	shown := s.wr.Status.Originals
	acknowledged := foreignRecordAcknowledged(s)
	if acknowledged && s.wr.Spec.Direction != v1alpha1.DirectionRollback {
		o := shown.DeepCopy()
		if err := record.Complete(ctx, r.APIReader, o); err != nil {
			return failed(err)
		}
		if err := r.saveRecord(ctx, s, o); err != nil {
			return failed(err)
		}
		rec, known := r.seen.recordOf(s.wr.UID)
		if !known || rec == nil {
			return failed(fmt.Errorf("ConfigMap %s/%s appeared while the acknowledged originals were being recorded; the next pass reads it",
				r.opts.Namespace, record.Name))
		}
		s.record, s.wr.Status.Originals = rec, o
		msg := fmt.Sprintf("the originals status.originals showed, acknowledged (%s), recorded in ConfigMap %s/%s; "+
			"the migration goes on from them", v1alpha1.AcknowledgeForeignRecord, r.opts.Namespace, record.Name)
		s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredFromRecord, msg)
		s.note(corev1.EventTypeNormal, conditions.ReasonRestoredFromRecord, "Record", "%s", msg)
		return done()
	}
	next := fmt.Sprintf("If these are the cluster's values from before the first change, add %s to spec.preflight.acknowledge",
		v1alpha1.AcknowledgeForeignRecord)
	if s.wr.Spec.Direction == v1alpha1.DirectionRollback {
		next = fmt.Sprintf("A rollback restores from the record alone: if these are the cluster's values from before the first change, "+
			"set spec.direction to Migrate with %s in spec.preflight.acknowledge, which records them, then roll back",
			v1alpha1.AcknowledgeForeignRecord)
	}
	msg := fmt.Sprintf("nothing was changed: status.originals shows values that no record holds (ConfigMap %s/%s does not exist): "+
		"a winready from before the record kept them in the status alone, or another hand wrote them. They are: %s. %s; "+
		"if not, clear them (kubectl patch windowsreadiness %s --subresource=status --type=merge -p '{\"status\":{\"originals\":null}}') "+
		"and the migration records the cluster as it is then",
		r.opts.Namespace, record.Name, record.Holds(shown), next, s.wr.Name)
	s.set(conditions.OriginalsRecorded, metav1.ConditionFalse, conditions.ReasonForeignRecord, msg)
	return stop(conditions.ReasonForeignRecord, "%s", msg)
}

// originals makes sure the record exists before the first change: it writes
// one from the cluster when there is none, and says so when the pass goes on
// from a record the status did not show (read back after the object was
// deleted and applied again, or restored without its status).
type originals struct {
	*Reconciler
	steps []phase.Step
}

func (r originals) reconcile(ctx context.Context, s *scope) Outcome {
	ns := r.opts.Namespace
	if s.record == nil {
		return r.record(ctx, s)
	}
	saved := s.record.Originals
	shown := s.before.Status.Originals.DeepCopy()
	if err := record.Complete(ctx, r.APIReader, shown); err != nil {
		return failed(err)
	}
	switch {
	case shown == nil:
		s.steps().reset(r.steps)
		msg := fmt.Sprintf("read back from ConfigMap %s/%s, recorded at %s before the first change; "+
			"the migration goes on from what the cluster shows", ns, record.Name, saved.RecordedAt.UTC().Format(time.RFC3339))
		s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredFromRecord, msg)
		s.note(corev1.EventTypeNormal, conditions.ReasonRestoredFromRecord, "Record", "the originals were %s", msg)
	case !equality.Semantic.DeepEqual(saved, shown):
		msg := fmt.Sprintf("status.originals disagreed with ConfigMap %s/%s, which was written before the first change and is used", ns, record.Name)
		s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredFromRecord, msg)
		s.note(corev1.EventTypeWarning, conditions.ReasonOriginalsUnsafe, "Record", "%s", msg)
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
		s.note(corev1.EventTypeWarning, conditions.ReasonOriginalsUnsafe, "Record", "%s", msg)
	}
	s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRecorded, msg)
	if err := r.checkpoint(ctx, s, "the first change"); err != nil {
		return failed(err)
	}
	s.note(corev1.EventTypeNormal, conditions.ReasonOriginalsRecorded, "Record", "recorded the values the migration will change")
	return done()
}

// recordedOriginals reads the originals the rollback restores, from the
// durable record alone (readRecord), never from the status. With none,
// there is nothing to roll back; with one that lacks a value, the rollback
// stops before its first change.
type recordedOriginals struct{ *Reconciler }

func (r recordedOriginals) reconcile(ctx context.Context, s *scope) Outcome {
	ns := r.opts.Namespace
	if s.record == nil {
		// Either a finished rollback deleted it, or no change was ever made.
		if ready := conditionOf(s, conditions.Ready); ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == conditions.ReasonRolledBack {
			return stop(conditions.ReasonRolledBack, "%s", ready.Message)
		}
		return stop(conditions.ReasonNothingToRollBack, "nothing to roll back: the migration changed nothing")
	}
	saved := s.record.Originals
	shown := s.before.Status.Originals.DeepCopy()
	if err := record.Complete(ctx, r.APIReader, shown); err != nil {
		return failed(err)
	}
	if !equality.Semantic.DeepEqual(saved, shown) {
		s.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredFromRecord,
			fmt.Sprintf("read back from ConfigMap %s/%s, recorded before the first change", ns, record.Name))
	}
	// A rollback never restores a value it does not know.
	if unknown := record.Unknown(saved, ns); len(unknown) > 0 {
		return stop(conditions.ReasonOriginalsIncomplete,
			"the rollback stopped before its first change: the originals, recorded by an earlier winready, lack %s", strings.Join(unknown, "; "))
	}
	return done()
}
