package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// statusWatch is one status --watch: what it prints and what it last printed.
type statusWatch struct {
	o       *options
	c       client.Client
	printer printers.ResourcePrinter // nil: the tree
	// oneLine prints each JSON object on a line of its own, so that a
	// pipeline reads the stream object by object (jq, a line reader).
	oneLine bool
	until   string
	last    string
}

// show prints wr when its spec or status differs from the last one printed,
// and says whether the watch is over.
func (s *statusWatch) show(ctx context.Context, wr *v1alpha1.WindowsReadiness) (bool, error) {
	key, err := json.Marshal([]any{wr.Generation, wr.Spec, wr.Status})
	if err != nil {
		return true, err
	}
	if string(key) != s.last {
		if err := s.print(ctx, wr); err != nil {
			return true, err
		}
		s.last = string(key)
		if s.o.printed != nil {
			s.o.printed()
		}
	}
	return reached(wr, s.until)
}

func (s *statusWatch) print(ctx context.Context, wr *v1alpha1.WindowsReadiness) error {
	if s.printer == nil && s.last != "" {
		fmt.Fprintln(s.o.streams.Out)
	}
	if !s.oneLine {
		return s.o.print(ctx, s.c, wr, s.printer)
	}
	var indented, line bytes.Buffer
	if err := s.printer.PrintObj(wr, &indented); err != nil {
		return err
	}
	if err := json.Compact(&line, indented.Bytes()); err != nil {
		return err
	}
	line.WriteByte('\n')
	_, err := s.o.streams.Out.Write(line.Bytes())
	return err
}

// permanent is the error that ends a watch with its own exit status, or nil
// when err is one to ride out (the informer under the watch retries it with
// its bounded backoff, 800ms doubling up to 30s).
func permanent(err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return err
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		// A list or a watch of a resource the API server no longer serves:
		// the CRD is gone.
		return notInstalled(err)
	}
	return nil
}

// watchStatus prints the WindowsReadiness, then again each time its spec or
// status changes, until it reaches until, or the watch fails for good, or
// ctx ends (then its cause, a timeout or a signal, is the error).
func (o *options) watchStatus(ctx context.Context, printer printers.ResourcePrinter, oneLine bool, until string) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	scheme, err := schemeOf()
	if err != nil {
		return err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	// The first read fails at once: a wrong cluster, a missing right or a
	// missing object is for the caller to fix before anything is waited for.
	wr, err := o.get(ctx, c)
	if err != nil {
		return orCause(ctx, err)
	}
	s := &statusWatch{o: o, c: c, printer: printer, oneLine: oneLine, until: until}
	if done, err := s.show(ctx, wr); done || err != nil {
		return err
	}

	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// The informer logs each failed request; check says it once, in the
	// plugin's words, on stderr.
	ctx = klog.NewContext(ctx, logr.Discard())
	// A permanent error ends the watch through ctx: the informer would retry
	// it for ever.
	check := func(ctx context.Context, verb string, err error) error {
		// Cut short by a signal or --timeout: the cause is the news.
		if err == nil || ctx.Err() != nil {
			return err
		}
		err = request(verb, windowsReadinesses, err)
		if p := permanent(err); p != nil {
			stop(p)
			return err
		}
		fmt.Fprintf(o.streams.ErrOut, "%s: %v; trying again\n", verb, err)
		return err
	}
	_, err = watchtools.UntilWithSync(ctx, listWatchOf(c, check), &v1alpha1.WindowsReadiness{}, nil, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			return true, errNoWindowsReadiness
		case watch.Added, watch.Modified:
			wr, ok := ev.Object.(*v1alpha1.WindowsReadiness)
			if !ok {
				return false, nil
			}
			return s.show(ctx, wr)
		}
		return false, nil
	})
	// Ended by a permanent error, a timeout or a signal: never success.
	return orCause(ctx, err)
}

// reached says whether wr is in state until ("" never is), and fails when
// it stalled on the way.
func reached(wr *v1alpha1.WindowsReadiness, until string) (bool, error) {
	if until == "" {
		return false, nil
	}
	current := func(t string) bool {
		c := meta.FindStatusCondition(wr.Status.Conditions, t)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == wr.Generation
	}
	stalled := current(conditions.Stalled)
	switch until {
	case "Ready":
		if current(conditions.Ready) {
			return true, nil
		}
	case "RolledBack":
		if wr.Status.Phase == v1alpha1.PhaseRolledBack && wr.Status.ObservedGeneration == wr.Generation {
			return true, nil
		}
	case "Stalled":
		return stalled, nil
	}
	if stalled {
		c := meta.FindStatusCondition(wr.Status.Conditions, conditions.Stalled)
		return true, withCode(ExitFailed, fmt.Errorf("stalled before %s: %s: %s", until, c.Reason, c.Message))
	}
	return false, nil
}

// listWatchOf lists and watches WindowsReadiness default alone, each
// request's error passed through check.
func listWatchOf(c client.WithWatch, check func(ctx context.Context, verb string, err error) error) *cache.ListWatch {
	byName := fields.OneTermEqualSelector("metadata.name", v1alpha1.Name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			list := &v1alpha1.WindowsReadinessList{}
			return list, check(ctx, "list", c.List(ctx, list, &client.ListOptions{Raw: &opts}))
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			w, err := c.Watch(ctx, &v1alpha1.WindowsReadinessList{}, &client.ListOptions{Raw: &opts})
			return w, check(ctx, "watch", err)
		},
	}
}
