package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestMonitoringDocListsEveryMetric: docs/monitoring.md's table names every
// metric this package defines, no other, and each is in the registry the
// manager serves. A registry lists only the series it has, so the names come
// from the source and each is checked against the registry: registering
// another collector under a registered name fails.
func TestMonitoringDocListsEveryMetric(t *testing.T) {
	Register()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(winready_[a-z_]+)[{`]").FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}

	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var defined []string
	for _, path := range sources {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`Name:\s+"(winready_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
			defined = append(defined, m[1])
		}
	}
	slices.Sort(documented)
	slices.Sort(defined)
	if len(defined) == 0 || !slices.Equal(documented, defined) {
		t.Errorf("docs/monitoring.md lists %v,\nthe package defines %v", documented, defined)
	}

	for _, name := range defined {
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "a probe of the registry"})
		if err := crmetrics.Registry.Register(probe); err == nil {
			crmetrics.Registry.Unregister(probe)
			t.Errorf("%s is defined but Register does not register it", name)
		}
	}
}
