package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/winready/winready/api/v1alpha1"
)

// TestPhaseGaugeCoversTheEnum compares the phases the gauge reports with the
// CRD's enum of status.phase, so that a new phase cannot read as all zeros.
func TestPhaseGaugeCoversTheEnum(t *testing.T) {
	src, err := os.ReadFile("../../api/v1alpha1/windowsreadiness_types.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\+kubebuilder:validation:Enum=(.*)\ntype Phase string`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no enum marker on type Phase")
	}
	enum := strings.Split(string(m[1]), ";")
	var listed []string
	for _, p := range v1alpha1.Phases {
		listed = append(listed, string(p))
	}
	slices.Sort(enum)
	slices.Sort(listed)
	if !slices.Equal(enum, listed) {
		t.Errorf("v1alpha1.Phases %v, the CRD's enum %v", listed, enum)
	}
	for _, p := range v1alpha1.Phases {
		RecordStatus(&v1alpha1.WindowsReadiness{Status: v1alpha1.WindowsReadinessStatus{Phase: p}})
		var m dto.Metric
		if err := phase.WithLabelValues(string(p)).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetGauge().GetValue(); got != 1 {
			t.Errorf("winready_phase{phase=%q} is %v while in that phase", p, got)
		}
	}
}
