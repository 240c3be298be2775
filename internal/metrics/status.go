package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/winready/winready/api/v1alpha1"
)

var (
	phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "winready_phase",
		Help: "1 for the WindowsReadiness's current phase, 0 for every other.",
	}, []string{"phase"})

	stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "winready_step_duration_seconds",
		Help:    "Time from a step's change to Calico having applied it, by step and direction.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14), // 0.5 s to about 68 min
	}, []string{"step", "direction"})

	probeFailingPairs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "winready_preflight_failing_pairs",
		Help: "Directed node pairs that UDP 4789 did not pass in the last probe round.",
	})

	blocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "winready_blocked",
		Help: "1 while the migration or rollback needs a person, labelled with the reason (the Stalled condition's).",
	}, []string{"reason"})
)

// RecordStatus sets the gauges from a WindowsReadiness's status.
func RecordStatus(wr *v1alpha1.WindowsReadiness) {
	for _, p := range v1alpha1.Phases {
		v := 0.0
		if p == wr.Status.Phase {
			v = 1
		}
		phase.WithLabelValues(string(p)).Set(v)
	}
	blocked.Reset()
	if c := meta.FindStatusCondition(wr.Status.Conditions, "Stalled"); c != nil && c.Status == "True" {
		blocked.WithLabelValues(c.Reason).Set(1)
	}
	failing := 0.0
	if pf := wr.Status.Preflight; pf != nil && pf.Probe != nil {
		failing = float64(pf.Probe.FailingPairs)
	}
	probeFailingPairs.Set(failing)
	RecordRollout(wr.Status.Rollout)
}

// ObserveStep records how long a step took, from its change to Calico
// having applied it.
func ObserveStep(step v1alpha1.StepName, direction v1alpha1.Direction, d time.Duration) {
	stepDuration.WithLabelValues(string(step), string(direction)).Observe(d.Seconds())
}
