package controllers

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/phase"
)

// The Tigera operator reads the Installation at the start of a reconcile and
// the services-endpoint ConfigMap near its end (core_controller.go), and it
// reconciles again after each of its own status writes. A reconcile already
// under way when winready patches the Installation and writes the ConfigMap
// reads the old Installation and the new ConfigMap: it renders calico-node
// once with the new address and BGP still on, and the next reconcile renders
// it again, a second template for the DaemonSet controller. Both winready and
// the operator wake on the same TigeraStatus change, so without a pause the
// race is frequent. A write that spans both objects therefore waits until the
// operator has written nothing to the Installation or TigeraStatus calico for
// DefaultOperatorQuiet (Reconciler.OperatorQuiet), and for at most
// quietWaitMax, after which it is made anyway (an operator that never rests
// must not stop the migration).
const (
	DefaultOperatorQuiet = 3 * time.Second
	quietWaitMax         = time.Minute
)

// activity is when winready last saw the Tigera operator write. It lives in
// memory only: after a restart the operator is simply waited for once more.
type activity struct {
	mu sync.Mutex
	// seen is the last resourceVersions seen, since when.
	seen  string
	since time.Time
	// waiting is when the current wait began; zero when none.
	waiting time.Time
}

// wait returns how much longer to wait for the operator to be quiet; zero
// when it has been quiet for quiet, or waited for long enough.
func (a *activity) wait(seen string, now time.Time, quiet time.Duration) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if seen != a.seen {
		a.seen, a.since = seen, now
	}
	if a.waiting.IsZero() {
		a.waiting = now
	}
	left := quiet - now.Sub(a.since)
	if left <= 0 || now.Sub(a.waiting) >= quietWaitMax {
		a.waiting = time.Time{}
		return 0
	}
	return left
}

// awaitQuiet holds a write that spans the Installation and the
// services-endpoint ConfigMap until the Tigera operator rests.
func (p *pass) awaitQuiet(b batched) *phase.Outcome {
	quiet := p.r.operatorQuiet()
	if len(b.steps) == 0 || quiet < 0 {
		return nil
	}
	c := p.cluster
	seen := []string{c.Installation.ResourceVersion}
	if h, ok := c.Health[calico.StatusCalico]; ok {
		seen = append(seen, h.ResourceVersion)
	}
	left := p.r.operatorActivity.wait(strings.Join(seen, "/"), p.r.Clock.Now(), quiet)
	if left == 0 {
		return nil
	}
	o := phase.WaitingFor(fmt.Sprintf("the Tigera operator to finish reconciling (no write for %s) so that "+
		"it renders these changes in one reconcile and calico-node rolls out once", quiet))
	o.After = left
	return &o
}
