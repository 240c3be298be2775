package metrics

import "github.com/prometheus/client_golang/prometheus"

// calicoNodeIgnored is 1 while calico-node carries the Tigera operator's
// ignore annotation: the operator then renders nothing into it, so no Calico
// change or upgrade reaches the nodes. set_by is winready (its hold, which
// lasts seconds) or other (a person, or a token that is not winready's
// field manager).
var calicoNodeIgnored = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "winready_calico_node_ignored",
	Help: "1 while DaemonSet calico-system/calico-node carries unsupported.operator.tigera.io/ignore, by who set it (winready or other).",
}, []string{"set_by"})

// RecordCalicoNodeIgnored sets the gauge: ignored says whether the
// annotation is there, ours whether winready's field manager set it.
func RecordCalicoNodeIgnored(ignored, ours bool) {
	calicoNodeIgnored.WithLabelValues("winready").Set(boolValue(ignored && ours))
	calicoNodeIgnored.WithLabelValues("other").Set(boolValue(ignored && !ours))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
