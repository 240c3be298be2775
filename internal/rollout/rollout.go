// Package rollout follows a DaemonSet rollout from successive observations of
// its status: the progress made since the last one, the pace per node, the
// time left at that pace, and whether the rollout has gone without progress
// for longer than a deadline. It is pure: the caller observes, keeps the State
// (in the WindowsReadiness status) and passes the time.
package rollout

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Observation is what a DaemonSet's status showed at one moment.
type Observation struct {
	DaemonSet          types.NamespacedName
	At                 time.Time
	Generation         int64
	ObservedGeneration int64
	Desired            int32
	Updated            int32
	Available          int32
	Unavailable        int32
}

// Observe takes the rollout-relevant part of ds's status, seen at at.
func Observe(ds *appsv1.DaemonSet, at time.Time) Observation {
	st := ds.Status
	return Observation{
		DaemonSet:          types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name},
		At:                 at,
		Generation:         ds.Generation,
		ObservedGeneration: st.ObservedGeneration,
		Desired:            st.DesiredNumberScheduled,
		Updated:            st.UpdatedNumberScheduled,
		Available:          st.NumberAvailable,
		Unavailable:        st.NumberUnavailable,
	}
}

// Done is the rollout's end as calico-facts state it: the controller has seen
// the latest template and every node runs it, available.
func (o Observation) Done() bool {
	return o.ObservedGeneration >= o.Generation && o.Updated == o.Desired &&
		o.Available == o.Desired && o.Unavailable == 0
}

// State is what is kept between observations. The zero State means nothing
// has been observed yet.
type State struct {
	// Last is the latest observation.
	Last Observation
	// LastProgressAt is when the rollout last moved; the deadline counts
	// from here.
	LastProgressAt time.Time
	// UpdatedChangedAt is when Last.Updated last changed; pace samples are
	// measured from here.
	UpdatedChangedAt time.Time
	// Pace is the smoothed time per updated node; zero until measured.
	Pace time.Duration
}

// paceWeight is the weight of a new pace sample in the moving average: enough
// to follow a change of pace within a few samples (a maxUnavailable change, a
// slower zone of nodes), little enough that one slow node does not swing the
// estimate.
const paceWeight = 0.3

// Step folds obs into s and says how many nodes were updated since the last
// observation. The first observation, and a new template (a higher
// generation), start the clocks afresh: a rollout that has just begun has
// progressed.
func (s State) Step(obs Observation) (State, int32) {
	if s.Last.At.IsZero() || obs.Generation != s.Last.Generation || obs.DaemonSet != s.Last.DaemonSet {
		next := State{Last: obs, LastProgressAt: obs.At, UpdatedChangedAt: obs.At}
		// The pace of the same DaemonSet carries over to its next template:
		// the nodes are the same.
		if obs.DaemonSet == s.Last.DaemonSet {
			next.Pace = s.Pace
		}
		return next, 0
	}
	advanced := max(0, obs.Updated-s.Last.Updated)
	next := s
	next.Last = obs
	if progressed(s.Last, obs) {
		next.LastProgressAt = obs.At
	}
	if obs.Updated != s.Last.Updated {
		if advanced > 0 {
			next.Pace = smooth(s.Pace, obs.At.Sub(s.UpdatedChangedAt)/time.Duration(advanced))
		}
		next.UpdatedChangedAt = obs.At
	}
	return next, advanced
}

// progressed says whether the rollout moved between two observations of the
// same template: the controller caught up with it, a node was updated, a pod
// became available, or the node count changed. A pod going unavailable is not
// progress.
func progressed(prev, cur Observation) bool {
	return cur.ObservedGeneration > prev.ObservedGeneration || cur.Updated > prev.Updated ||
		cur.Available > prev.Available || cur.Desired != prev.Desired
}

func smooth(prev, sample time.Duration) time.Duration {
	if prev == 0 {
		return sample
	}
	return time.Duration(paceWeight*float64(sample) + (1-paceWeight)*float64(prev))
}

// Left is the estimated time until every node is updated at the current pace;
// false while no pace has been measured.
func (s State) Left() (time.Duration, bool) {
	if s.Pace == 0 {
		return 0, false
	}
	remaining := max(0, s.Last.Desired-s.Last.Updated)
	return time.Duration(remaining) * s.Pace, true
}

// Message reads like "412/1000 updated, about 4h20m left".
func (s State) Message() string {
	msg := fmt.Sprintf("%d/%d updated", s.Last.Updated, s.Last.Desired)
	if s.Last.Done() {
		return msg
	}
	if left, ok := s.Left(); ok {
		msg += ", about " + Human(left) + " left"
	}
	return msg
}

// Human rounds d for people: whole minutes above an hour ("4h20m"), whole
// seconds above a minute ("3m5s"), else seconds ("12s", "0s").
func Human(d time.Duration) string {
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return d.Round(time.Second).String()
}

// Stalled says whether the rollout has gone without progress for longer than
// deadline at now, and if so what it waited for.
func (s State) Stalled(now time.Time, deadline time.Duration) (bool, string) {
	if s.Last.At.IsZero() || s.Last.Done() || now.Sub(s.LastProgressAt) <= deadline {
		return false, ""
	}
	return true, fmt.Sprintf("no progress for %s (deadline %s): %s", Human(now.Sub(s.LastProgressAt)), deadline, s.WaitingFor())
}

// WaitingFor names what the rollout waits for, from the last observation.
func (s State) WaitingFor() string {
	o := s.Last
	ds := o.DaemonSet.String()
	switch {
	case o.ObservedGeneration < o.Generation:
		return fmt.Sprintf("DaemonSet %s: the DaemonSet controller has not observed generation %d (it is at %d)", ds, o.Generation, o.ObservedGeneration)
	case o.Unavailable > 0:
		return fmt.Sprintf("DaemonSet %s: %d pod(s) not available (%d/%d updated, %d available)", ds, o.Unavailable, o.Updated, o.Desired, o.Available)
	case o.Updated < o.Desired:
		return fmt.Sprintf("DaemonSet %s: %d node(s) still to update (%d/%d updated)", ds, o.Desired-o.Updated, o.Updated, o.Desired)
	}
	return fmt.Sprintf("DaemonSet %s: rollout complete", ds)
}

// Length is how long a rollout over nodes takes at pace per node: the
// canary's nodes one at a time, then the rest maxUnavailable at a time (the
// DaemonSet controller's scaling: a percentage of nodes, rounded up, at
// least one). A canary adds at most canary x pace to the rollout without it.
func Length(nodes int, maxUnavailable intstr.IntOrString, canary int, pace time.Duration) time.Duration {
	canary = max(0, min(canary, nodes))
	wave, err := intstr.GetScaledValueFromIntOrPercent(&maxUnavailable, nodes, true)
	if err != nil || wave < 1 {
		wave = 1
	}
	rest := nodes - canary
	waves := (rest + wave - 1) / wave
	return time.Duration(canary+waves) * pace
}
