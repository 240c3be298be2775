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
		Name: "winready_step_duration_seconds",
		Help: "Time from a step's change to Calico having applied it, by step and direction.",
		// A step on a small cluster takes seconds; one calico-node rollout of
		// thousands of nodes at a real pace takes a day or two.
		Buckets: StepDurationBuckets,
	}, []string{"step", "direction"})

	progressDeadline = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "winready_progress_deadline_seconds",
		Help: "How long a step may go without progress before it stalls (spec.progressDeadline); alerts compare the time since the last progress with it.",
	})

	windowsNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "winready_windows_nodes",
		Help: "Windows nodes by join state: Joining, Joined, or Overdue (still waiting past spec.windowsNodes.joinTimeout).",
	}, []string{"state"})

	lastProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "winready_last_progress_timestamp_seconds",
		Help: "When what the migration or rollback waits for last moved (a node updated, a status changed), as a Unix time; absent before the first step.",
	})

	probeFailingPairs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "winready_preflight_failing_pairs",
		Help: "Directed node pairs that UDP 4789 did not pass in the last probe round.",
	})

	blocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "winready_blocked",
		Help: "1 while the migration or rollback needs a person, labelled with the reason (the Stalled condition's).",
	}, []string{"reason"})
)

// StepDurationBuckets are winready_step_duration_seconds's buckets, from a
// second to 48 hours.
var StepDurationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600,
	12 * 3600, 24 * 3600, 36 * 3600, 48 * 3600}

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
	progressDeadline.Set(wr.Spec.EffectiveProgressDeadline().Seconds())
	for _, state := range []v1alpha1.JoinState{v1alpha1.JoinJoining, v1alpha1.JoinJoined, v1alpha1.JoinOverdue} {
		n := 0
		for _, j := range wr.Status.WindowsNodeJoins {
			if j.State == state {
				n++
			}
		}
		windowsNodes.WithLabelValues(string(state)).Set(float64(n))
	}
	if at := lastProgressAt(wr.Status); !at.IsZero() {
		lastProgress.Set(float64(at.UnixNano()) / 1e9)
	}
}

// lastProgressAt is the latest time anything the steps wait for moved.
func lastProgressAt(st v1alpha1.WindowsReadinessStatus) time.Time {
	var latest time.Time
	for _, s := range st.Steps {
		if s.LastProgressAt != nil && s.LastProgressAt.After(latest) {
			latest = s.LastProgressAt.Time
		}
	}
	if r := st.Rollout; r != nil && r.LastProgressAt != nil && r.LastProgressAt.After(latest) {
		latest = r.LastProgressAt.Time
	}
	return latest
}

// ObserveStep records how long a step took, from its change to Calico
// having applied it.
func ObserveStep(step v1alpha1.StepName, direction v1alpha1.Direction, d time.Duration) {
	stepDuration.WithLabelValues(string(step), string(direction)).Observe(d.Seconds())
}
