package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/winready/winready/internal/version"
)

func TestBuildInfoIsServedWithTheManagersMetrics(t *testing.T) {
	Register()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := version.Get()
	for _, f := range families {
		if f.GetName() != "winready_build_info" {
			continue
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["version"] != v.Version || labels["revision"] != v.Revision || labels["goversion"] != v.GoVersion {
			t.Errorf("labels %v, want those of %+v", labels, v)
		}
		if got := testutil.ToFloat64(buildInfo); got != 1 {
			t.Errorf("winready_build_info = %v, want 1", got)
		}
		return
	}
	t.Error("winready_build_info is not in the manager's registry")
}
