package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
)

// gathered returns every sample of the rollout gauges, keyed by metric name
// and label values.
func gathered(t *testing.T) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(rolloutCollectors...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetValue()
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestRecordRollout(t *testing.T) {
	RecordRollout(&v1alpha1.RolloutStatus{DaemonSet: "calico-system/calico-node", Updated: 412, Total: 1000, Unavailable: 1,
		PacePerNode: &metav1.Duration{Duration: 27 * time.Second}, EstimatedTimeLeft: &metav1.Duration{Duration: 4 * time.Hour}})
	got := gathered(t)
	if v := got["winready_rollout_remaining_seconds calico-system/calico-node"]; v != 4*3600 {
		t.Fatalf("estimate %v, want 14400 (%v)", v, got)
	}
	if v := got["winready_rollout_nodes calico-system/calico-node updated"]; v != 412 {
		t.Fatalf("updated %v, want 412 (%v)", v, got)
	}
	RecordRollout(&v1alpha1.RolloutStatus{DaemonSet: "calico-system/calico-node", Updated: 3, Total: 3})
	if v, ok := gathered(t)["winready_rollout_remaining_seconds calico-system/calico-node"]; !ok || v != 0 {
		t.Fatalf("a finished rollout has %v left (present %v), want 0", v, ok)
	}
	RecordRollout(nil)
	if got := gathered(t); len(got) != 0 {
		t.Fatalf("series after the rollout is gone: %v", got)
	}
}
