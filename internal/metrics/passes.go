package metrics

import "github.com/prometheus/client_golang/prometheus"

// Pass triggers that are not a watch: the pass the previous one asked for
// after a while, and the retry of a pass that failed.
const (
	TriggerRequeue = "RequeueAfter"
	TriggerRetry   = "Retry"
	// TriggerStart is the first pass of a manager, which the informers'
	// initial lists wake.
	TriggerStart = "Start"
)

var passes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "winready_passes_total",
	Help: "Passes of the reconciler by what woke them: the kind of the watched object whose event came first " +
		"since the pass before (a pass that several events woke counts once, for the first), RequeueAfter, or Retry " +
		"after a failed pass.",
}, []string{"trigger"})

// RecordPass counts a pass that trigger woke.
func RecordPass(trigger string) { passes.WithLabelValues(trigger).Inc() }
