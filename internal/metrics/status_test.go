package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
)

// TestPhaseGaugeCoversTheEnum compares the phases the gauge reports with the
// CRD's enum of status.phase, so that a new phase cannot read as all zeros.
func TestPhaseGaugeCoversTheEnum(t *testing.T) {
	src, err := os.ReadFile("../../api/v1alpha1/phase_steps_types.go")
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

func TestStepDurationsOfRealRolloutsLandInABucket(t *testing.T) {
	if last := StepDurationBuckets[len(StepDurationBuckets)-1]; last < 48*3600 {
		t.Errorf("the last bucket is %vs: a two-day rollout of thousands of nodes lands in +Inf", last)
	}
	ObserveStep(v1alpha1.StepBGP, v1alpha1.DirectionMigrate, 37*time.Hour)
	var m dto.Metric
	if err := stepDuration.WithLabelValues(string(v1alpha1.StepBGP), string(v1alpha1.DirectionMigrate)).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	for _, b := range m.GetHistogram().GetBucket() {
		if b.GetUpperBound() >= 37*3600 && b.GetCumulativeCount() == 1 {
			return
		}
	}
	t.Error("a 37-hour step is counted in no finite bucket")
}

func TestLastProgressIsTheLatestMove(t *testing.T) {
	early := metav1.NewTime(time.Unix(1000, 0))
	late := metav1.NewTime(time.Unix(5000, 0))
	RecordStatus(&v1alpha1.WindowsReadiness{Status: v1alpha1.WindowsReadinessStatus{
		Steps:   []v1alpha1.StepStatus{{Name: v1alpha1.StepBGP, LastProgressAt: &early}},
		Rollout: &v1alpha1.RolloutStatus{LastProgressAt: &metav1.MicroTime{Time: late.Time}},
	}})
	var m dto.Metric
	if err := lastProgress.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetGauge().GetValue(); got != 5000 {
		t.Errorf("winready_last_progress_timestamp_seconds = %v, want 5000", got)
	}
}

func TestWindowsNodesByStateAndTheDeadline(t *testing.T) {
	RecordStatus(&v1alpha1.WindowsReadiness{Status: v1alpha1.WindowsReadinessStatus{
		WindowsNodeJoins: []v1alpha1.WindowsNodeJoin{{Name: "a", State: v1alpha1.JoinOverdue},
			{Name: "b", State: v1alpha1.JoinJoined}, {Name: "c", State: v1alpha1.JoinOverdue}}}})
	for state, want := range map[string]float64{"Overdue": 2, "Joined": 1, "Joining": 0} {
		var m dto.Metric
		if err := windowsNodes.WithLabelValues(state).Write(&m); err != nil {
			t.Fatal(err)
		}
		if m.GetGauge().GetValue() != want {
			t.Errorf("winready_windows_nodes{state=%q} = %v, want %v", state, m.GetGauge().GetValue(), want)
		}
	}
	var m dto.Metric
	if err := progressDeadline.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.GetGauge().GetValue() != v1alpha1.DefaultProgressDeadline.Seconds() {
		t.Errorf("winready_progress_deadline_seconds = %v", m.GetGauge().GetValue())
	}
}
