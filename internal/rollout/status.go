package rollout

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/winready/winready/api/v1alpha1"
)

// ToStatus is s as the WindowsReadiness status records it; nil for the zero
// State.
func (s State) ToStatus() *v1alpha1.RolloutStatus {
	if s.Last.At.IsZero() {
		return nil
	}
	o := s.Last
	st := &v1alpha1.RolloutStatus{
		DaemonSet:          o.DaemonSet.String(),
		Generation:         o.Generation,
		ObservedGeneration: o.ObservedGeneration,
		Updated:            o.Updated,
		Unavailable:        o.Unavailable,
		Available:          o.Available,
		Total:              o.Desired,
		LastProgressAt:     timeOf(s.LastProgressAt),
		UpdatedChangedAt:   timeOf(s.UpdatedChangedAt),
	}
	if s.Pace > 0 {
		st.PacePerNode = &metav1.Duration{Duration: s.Pace.Round(time.Millisecond)}
	}
	if left, ok := s.Left(); ok && !o.Done() {
		st.EstimatedTimeLeft = &metav1.Duration{Duration: left.Round(time.Second)}
	}
	return st
}

// FromStatus is the State a status recorded; nil gives the zero State. The
// time of the last observation is not recorded: the later of the two
// recorded times stands for it.
func FromStatus(st *v1alpha1.RolloutStatus) State {
	if st == nil {
		return State{}
	}
	ns, name, _ := strings.Cut(st.DaemonSet, "/")
	var s State
	s.Last = Observation{
		DaemonSet:          types.NamespacedName{Namespace: ns, Name: name},
		Generation:         st.Generation,
		ObservedGeneration: st.ObservedGeneration,
		Desired:            st.Total,
		Updated:            st.Updated,
		Available:          st.Available,
		Unavailable:        st.Unavailable,
	}
	if st.LastProgressAt != nil {
		s.LastProgressAt = st.LastProgressAt.Time
	}
	if st.UpdatedChangedAt != nil {
		s.UpdatedChangedAt = st.UpdatedChangedAt.Time
	}
	s.Last.At = latest(s.LastProgressAt, s.UpdatedChangedAt)
	if st.PacePerNode != nil {
		s.Pace = st.PacePerNode.Duration
	}
	return s
}

// timeOf keeps microseconds: at a bench's pace of milliseconds per node a
// time rounded to the second would make the pace meaningless.
func timeOf(t time.Time) *metav1.MicroTime {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewMicroTime(t)
	return &mt
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
