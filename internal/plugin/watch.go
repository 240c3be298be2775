package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// watchBackoff spaces the retries after an API error: a blip costs a
// second, an outage one try every half minute.
var watchBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Cap: 30 * time.Second, Steps: 1 << 30}

// statusWatch is one status --watch: what it prints and what it last printed.
type statusWatch struct {
	o             *options
	c             client.Client
	output, until string
	last          string
	backoff       wait.Backoff
}

// show prints wr when its spec or status differs from the last one printed,
// and says whether the watch is over.
func (s *statusWatch) show(ctx context.Context, wr *v1alpha1.WindowsReadiness) (bool, error) {
	key, err := json.Marshal([]any{wr.Generation, wr.Spec, wr.Status})
	if err != nil {
		return true, err
	}
	if string(key) != s.last {
		if s.last != "" && s.output == "" {
			fmt.Fprintln(s.o.streams.Out)
		}
		if err := s.o.print(ctx, s.c, wr, s.output); err != nil {
			return true, err
		}
		s.last = string(key)
		if s.o.printed != nil {
			s.o.printed()
		}
	}
	return reached(wr, s.until)
}

// retry waits the next backoff step after err, or returns err when waiting
// cannot help.
func (s *statusWatch) retry(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	// Nothing printed yet: a wrong cluster or a missing right fails at
	// once, so a pipeline learns it before it waits.
	if s.last == "" {
		return err
	}
	switch explain(err).code {
	case ExitNotInstalled, ExitNoWindowsReadiness, ExitForbidden, ExitError:
		return err
	}
	d := s.backoff.Step()
	fmt.Fprintf(s.o.streams.ErrOut, "watch: %v; again in %s\n", err, d.Round(time.Second))
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return nil
}

// watchStatus prints the WindowsReadiness, then again each time its spec or
// status changes, until ctx ends or it reaches until.
func (o *options) watchStatus(ctx context.Context, output, until string) error {
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
	base := watchBackoff
	if o.backoff != nil {
		base = *o.backoff
	}
	s := &statusWatch{o: o, c: c, output: output, until: until, backoff: base}
	show := func(wr *v1alpha1.WindowsReadiness) (bool, error) { return s.show(ctx, wr) }
	for ctx.Err() == nil {
		wr, err := o.get(ctx, c)
		if err != nil {
			if err := s.retry(ctx, err); err != nil {
				return err
			}
			continue
		}
		s.backoff = base
		if done, err := show(wr); done || err != nil {
			return err
		}
		w, err := c.Watch(ctx, &v1alpha1.WindowsReadinessList{}, client.MatchingFields{"metadata.name": v1alpha1.Name},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: wr.ResourceVersion, AllowWatchBookmarks: true}})
		if err != nil {
			if err := s.retry(ctx, err); err != nil {
				return err
			}
			continue
		}
		done, err := o.follow(ctx, w, show)
		w.Stop()
		if done || err != nil {
			return err
		}
	}
	// Interrupted or timed out: never success.
	return context.Cause(ctx)
}

// follow hands each new state of the WindowsReadiness to show, until the
// watch ends (then the caller reads the object again) or show is done.
func (o *options) follow(ctx context.Context, w watch.Interface, show func(*v1alpha1.WindowsReadiness) (bool, error)) (bool, error) {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			wr, ok := ev.Object.(*v1alpha1.WindowsReadiness)
			if !ok {
				continue
			}
			if done, err := show(wr); done || err != nil {
				return done, err
			}
		case watch.Deleted:
			return true, errNoWindowsReadiness
		case watch.Error:
			// A watch cut short by a signal or --timeout ends in an error
			// event: the cause is the news, not the event.
			if ctx.Err() != nil {
				return false, nil
			}
			fmt.Fprintf(o.streams.ErrOut, "watch: %v; reading it again\n", ev.Object)
			return false, nil
		}
	}
	return false, nil
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
