// Package contention plays another writer of the objects winready shares,
// and records what the WindowsReadiness said meanwhile: the tests of lost
// races on envtest and against the real Tigera operator use it alike.
package contention

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
)

// Labeler patches a label of Installation default every interval (as fast as
// it can with 0) until stopped, as a GitOps agent's tracking label or a
// labeler would.
type Labeler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	patches atomic.Int64
	mu      sync.Mutex
	err     error
}

// StartLabeler starts a Labeler with c.
func StartLabeler(c client.Client, interval time.Duration) *Labeler {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Labeler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		for i := 0; ctx.Err() == nil; i++ {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"example.com/labeled":"%d"}}}`, i)
			if err := c.Patch(ctx, inst, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				if ctx.Err() == nil {
					l.mu.Lock()
					l.err = fmt.Errorf("labelling Installation default: %w", err)
					l.mu.Unlock()
				}
				return
			}
			l.patches.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return l
}

// Stop stops the labeler and returns how many patches it made, and the
// error that stopped it early, if any.
func (l *Labeler) Stop() (int64, error) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.patches.Load(), l.err
}

// Reasons records the reason of every Reconciling and Stalled condition
// that is True on WindowsReadiness default, as a watch sees each status.
type Reasons struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	reasons []string
}

// WatchReasons starts recording with c.
func WatchReasons(c client.WithWatch) (*Reasons, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, &v1alpha1.WindowsReadinessList{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching the WindowsReadiness: %w", err)
	}
	r := &Reasons{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			wr, ok := ev.Object.(*v1alpha1.WindowsReadiness)
			if !ok {
				continue
			}
			r.mu.Lock()
			for _, typ := range []string{conditions.Reconciling, conditions.Stalled} {
				if c := meta.FindStatusCondition(wr.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue {
					r.reasons = append(r.reasons, c.Reason)
				}
			}
			r.mu.Unlock()
		}
	}()
	return r, nil
}

// Stop ends the watch and returns the reasons seen, in order.
func (r *Reasons) Stop() []string {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}
