package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
)

// Bounds of the backoff after a failed read or write.
const (
	DefaultRetryBase = 500 * time.Millisecond
	DefaultRetryMax  = time.Minute
)

// backoff counts consecutive failed reconciles and says how long to wait
// before the next: doubling from the base, capped at the maximum. One
// WindowsReadiness exists, so one counter is enough.
type backoff struct {
	mu       sync.Mutex
	failures int
}

// next records a failure and returns the wait before the next attempt.
func (b *backoff) next(base, limit time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	d := base
	for i := 1; i < b.failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func (b *backoff) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures = 0
}

func (b *backoff) attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures
}

// retrying records in the status that the pass failed on err and when it is
// tried again. A failure of a read or write is weather, not a verdict: the
// object keeps Reconciling, never Stalled.
func (p *pass) retrying(err error, after time.Duration) {
	at := p.r.Clock.Now().Add(after)
	msg := bounded(fmt.Sprintf("%v; retrying at %s (in %s, attempt %d)", err,
		at.UTC().Format(time.RFC3339), after.Round(time.Millisecond), p.r.retries.attempts()))
	p.set(conditions.Stalled, metav1.ConditionFalse, conditions.ReasonRetrying, "")
	p.set(conditions.Reconciling, metav1.ConditionTrue, conditions.ReasonRetrying, msg)
	p.set(conditions.Ready, metav1.ConditionFalse, conditions.ReasonRetrying, msg)
	p.wr.Status.Message = msg
}

// calicoAPIServerDown replaces a generic retry with the Calico API server's
// own reason when its APIService is not Available: a 503 from
// projectcalico.org/v3 then means that server is down, not the cluster.
func (p *pass) calicoAPIServerDown(ctx context.Context, err error, after time.Duration) {
	why, rerr := calico.APIServiceUnavailable(ctx, p.r.APIReader)
	if rerr != nil || why == "" {
		return
	}
	at := p.r.Clock.Now().Add(after)
	msg := bounded(fmt.Sprintf("the Calico API server is unavailable: %s; projectcalico.org/v3 answers %v. Check TigeraStatus "+
		"apiserver and the calico-apiserver pods; retrying at %s (attempt %d)", why, err, at.UTC().Format(time.RFC3339), p.r.retries.attempts()))
	p.set(conditions.Stalled, metav1.ConditionFalse, conditions.ReasonCalicoAPIServerUnavailable, "")
	p.set(conditions.Reconciling, metav1.ConditionTrue, conditions.ReasonCalicoAPIServerUnavailable, msg)
	p.set(conditions.Ready, metav1.ConditionFalse, conditions.ReasonCalicoAPIServerUnavailable, msg)
	p.wr.Status.Message = msg
}
