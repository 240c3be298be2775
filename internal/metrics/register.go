package metrics

import (
	"sync"

	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var registerOnce sync.Once

// Register adds winready's metrics to controller-runtime's registry, which
// the manager serves.
func Register() {
	registerOnce.Do(func() {
		crmetrics.Registry.MustRegister(apiWrites, reads, phase, stepDuration, probeFailingPairs, blocked)
		crmetrics.Registry.MustRegister(rolloutCollectors...)
		crmetrics.Registry.MustRegister(buildInfo, lastProgress, progressDeadline, windowsNodes, calicoNodeIgnored, passes)
	})
}
