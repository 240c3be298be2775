package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/winready/winready/internal/version"
)

// buildInfo tells which winready runs, so that a dashboard can tell an
// upgrade in the middle of a migration from a restart.
var buildInfo = func() prometheus.Collector {
	v := version.Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "winready_build_info",
		Help: "Always 1; the labels are the running winready's version, the commit it was built from and its Go version.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	return g
}()
