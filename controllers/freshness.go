package controllers

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/record"
)

// readWindowsReadiness reads the object from the cache when the cache shows
// the newest version this manager knows of (its own last status write, in a
// steady pass). A cache still behind that version (the write's event not yet
// in, while a report wakes the pass) gives way to the version itself, as the
// write returned it: the status written by the previous pass must be seen,
// or a finished step would be waited for again. A spec edit, an annotation,
// any other writer, or versions that do not compare make it read past the
// cache; fresh says it did.
func (r *Reconciler) readWindowsReadiness(ctx context.Context, key client.ObjectKey) (wr *v1alpha1.WindowsReadiness, fresh bool, err error) {
	wr = &v1alpha1.WindowsReadiness{}
	if err := r.Client.Get(ctx, key, wr); err == nil {
		if newest, ok := r.seen.newestFor(wr); ok {
			return newest, false, nil
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, false, err
	}
	wr = &v1alpha1.WindowsReadiness{}
	if err := r.APIReader.Get(ctx, key, wr); err != nil {
		return nil, true, err
	}
	r.seen.saw(wr)
	return wr, true, nil
}

// loadRecord reads the durable record of the originals, nil when there is
// none: past the cache (winready does not watch its own namespace) whenever
// the pass read the WindowsReadiness past the cache, else as this manager
// last read or wrote it. Only winready writes the record; a person who
// repairs it annotates the WindowsReadiness after (docs/troubleshooting.md),
// which makes the next pass read both.
func (r *Reconciler) loadRecord(ctx context.Context, s *scope) (*record.Record, error) {
	saved, known := r.seen.recordOf(s.wr.UID)
	if !known || s.fresh {
		var err error
		if saved, err = record.Load(ctx, r.APIReader, r.opts.Namespace); err != nil {
			return nil, err
		}
		r.seen.setRecord(s.wr.UID, saved)
	}
	return saved, nil
}

// saveRecord writes the record of this WindowsReadiness's migration unless
// one exists (record.Save) and remembers what it holds.
func (r *Reconciler) saveRecord(ctx context.Context, s *scope, o *v1alpha1.Originals) error {
	created, err := record.Save(ctx, r.Client, r.opts.Namespace, s.wr.UID, o)
	switch {
	case err != nil:
		return err
	case created:
		r.seen.setRecord(s.wr.UID, &record.Record{Originals: o, WrittenFor: s.wr.UID})
	default:
		// One was there already: the next pass reads it.
		r.seen.setRecord("", nil)
	}
	return nil
}

// deleteRecord deletes the record (record.Delete) and remembers that there
// is none.
func (r *Reconciler) deleteRecord(ctx context.Context, s *scope) error {
	if err := record.Delete(ctx, r.APIReader, r.Client, r.opts.Namespace); err != nil {
		return err
	}
	r.seen.setRecord(s.wr.UID, nil)
	return nil
}
