package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/winready/winready/api/v1alpha1"
)

// The calico-node rollout as the status shows it: the estimate a dashboard
// or an alert reads ("the migration will not finish inside the window").
var (
	rolloutLeft = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "winready_rollout_remaining_seconds",
		Help: "Estimated time until the DaemonSet rollout the migration waits for is done, at its measured pace; absent before the pace is known.",
	}, []string{"daemonset"})

	rolloutPace = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "winready_rollout_seconds_per_node",
		Help: "Smoothed time one node has taken to update in the DaemonSet rollout.",
	}, []string{"daemonset"})

	rolloutNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "winready_rollout_nodes",
		Help: "Nodes of the DaemonSet rollout, by state: updated or total.",
	}, []string{"daemonset", "state"})
)

// rolloutCollectors are registered with the others in Register.
var rolloutCollectors = []prometheus.Collector{rolloutLeft, rolloutPace, rolloutNodes}

// RecordRollout sets the rollout gauges from status.rollout; nil (no rollout
// seen) removes them.
func RecordRollout(st *v1alpha1.RolloutStatus) {
	rolloutLeft.Reset()
	rolloutPace.Reset()
	rolloutNodes.Reset()
	if st == nil {
		return
	}
	rolloutNodes.WithLabelValues(st.DaemonSet, "updated").Set(float64(st.Updated))
	rolloutNodes.WithLabelValues(st.DaemonSet, "total").Set(float64(st.Total))
	if st.PacePerNode != nil {
		rolloutPace.WithLabelValues(st.DaemonSet).Set(st.PacePerNode.Seconds())
	}
	switch {
	case st.EstimatedTimeLeft != nil:
		rolloutLeft.WithLabelValues(st.DaemonSet).Set(st.EstimatedTimeLeft.Seconds())
	case st.Updated == st.Total && st.Unavailable == 0:
		rolloutLeft.WithLabelValues(st.DaemonSet).Set(0)
	}
}
