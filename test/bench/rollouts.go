package main

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/rollout"
)

// rolloutTrace follows calico-node's status through a run with the same
// arithmetic winready uses (internal/rollout): how long its longest rollout
// took, and its longest time without progress. Scaled to a real cluster's
// pace, the first is what a deadline on a step's total time is up against,
// the second what a progress deadline is.
type rolloutTrace struct {
	mu          sync.Mutex
	state       rollout.State
	began       time.Time
	longestWait time.Duration
	longestGap  time.Duration
	cancel      context.CancelFunc
	done        chan struct{}
}

func watchRollouts(ctx context.Context, c client.WithWatch) (*rolloutTrace, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := c.Watch(ctx, &appsv1.DaemonSetList{}, client.InNamespace(calicoNodeNS),
		client.MatchingFields{"metadata.name": calicoNodeName})
	if err != nil {
		cancel()
		return nil, err
	}
	t := &rolloutTrace{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer w.Stop()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if ds, isDS := ev.Object.(*appsv1.DaemonSet); isDS {
					t.observe(rollout.Observe(ds, time.Now()))
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return t, nil
}

func (t *rolloutTrace) observe(obs rollout.Observation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gapUntil(obs.At)
	prev := t.state
	t.state, _ = t.state.Step(obs)
	if prev.Last.Generation != obs.Generation {
		t.began = obs.At
	}
	if obs.Done() && !t.began.IsZero() {
		t.longestWait = max(t.longestWait, obs.At.Sub(t.began))
		t.began = time.Time{}
	}
}

// gapUntil counts the time without progress up to at, while a rollout runs.
func (t *rolloutTrace) gapUntil(at time.Time) {
	if !t.state.Last.At.IsZero() && !t.state.Last.Done() {
		t.longestGap = max(t.longestGap, at.Sub(t.state.LastProgressAt))
	}
}

// stop ends the trace and returns the longest rollout and the longest time
// without progress (a rollout still running counts up to now).
func (t *rolloutTrace) stop() (longestWait, longestGap time.Duration) {
	t.cancel()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.gapUntil(now)
	if !t.began.IsZero() {
		t.longestWait = max(t.longestWait, now.Sub(t.began))
	}
	return t.longestWait, t.longestGap
}
