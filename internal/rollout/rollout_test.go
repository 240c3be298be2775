package rollout

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	t0   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	node = types.NamespacedName{Namespace: "calico-system", Name: "calico-node"}
)

// obs is an observation of calico-node at generation 2, seen at t0+at.
func obs(at time.Duration, desired, updated, unavailable int32) Observation {
	return Observation{DaemonSet: node, At: t0.Add(at), Generation: 2, ObservedGeneration: 2,
		Desired: desired, Updated: updated, Available: desired - unavailable, Unavailable: unavailable}
}

func walk(observations ...Observation) State {
	var s State
	for _, o := range observations {
		s, _ = s.Step(o)
	}
	return s
}

func TestPaceAndEstimate(t *testing.T) {
	cases := []struct {
		name     string
		obs      []Observation
		wantPace time.Duration
		wantLeft string
	}{
		{"no pace before the first node", []Observation{obs(0, 1000, 0, 1), obs(10*time.Second, 1000, 0, 1)}, 0, ""},
		{"27s per node", []Observation{obs(0, 1000, 0, 1), obs(27*time.Second, 1000, 1, 1), obs(54*time.Second, 1000, 2, 1)},
			27 * time.Second, "7h29m"},
		{"several nodes per observation", []Observation{obs(0, 1000, 0, 1), obs(270*time.Second, 1000, 10, 1)},
			27 * time.Second, "7h26m"},
		{"a faster pace is followed smoothly", []Observation{obs(0, 100, 0, 1), obs(20*time.Second, 100, 1, 1), obs(30*time.Second, 100, 2, 1)},
			17 * time.Second, "27m46s"},
		{"observations without change leave the pace", []Observation{obs(0, 100, 0, 1), obs(20*time.Second, 100, 1, 1), obs(25*time.Second, 100, 1, 1)},
			20 * time.Second, "33m0s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := walk(c.obs...)
			if s.Pace != c.wantPace {
				t.Fatalf("pace %s, want %s", s.Pace, c.wantPace)
			}
			left, ok := s.Left()
			if got := map[bool]string{true: Human(left), false: ""}[ok]; got != c.wantLeft {
				t.Fatalf("left %q, want %q", got, c.wantLeft)
			}
		})
	}
}

func TestStepCountsNodesUpdatedSinceTheLastObservation(t *testing.T) {
	s := walk(obs(0, 10, 2, 1))
	s, advanced := s.Step(obs(time.Second, 10, 5, 1))
	if advanced != 3 {
		t.Fatalf("advanced %d, want 3", advanced)
	}
	if _, advanced = s.Step(obs(2*time.Second, 10, 4, 1)); advanced != 0 {
		t.Fatalf("a lower count advanced %d, want 0", advanced)
	}
}

func TestMessage(t *testing.T) {
	cases := []struct {
		name string
		s    State
		want string
	}{
		{"the example", State{Last: obs(0, 1000, 412, 1), Pace: 26530 * time.Millisecond}, "412/1000 updated, about 4h20m left"},
		{"no pace yet", walk(obs(0, 1000, 0, 1)), "0/1000 updated"},
		{"done", State{Last: obs(0, 5, 5, 0), Pace: time.Second}, "5/5 updated"},
		{"seconds", State{Last: obs(0, 10, 9, 1), Pace: 27 * time.Second}, "9/10 updated, about 27s left"},
	}
	for _, c := range cases {
		if got := c.s.Message(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDeadlineCountsFromTheLastProgress(t *testing.T) {
	deadline := 30 * time.Minute
	cases := []struct {
		name        string
		obs         []Observation
		now         time.Duration
		wantStalled bool
		wantWaiting string
	}{
		{"a slow rollout that moves never stalls", slowRollout(100, 29*time.Minute), 100 * 29 * time.Minute, false, ""},
		{"a stuck pod stalls, naming it", []Observation{obs(0, 100, 0, 1), obs(time.Minute, 100, 1, 1), obs(40*time.Minute, 100, 1, 1)},
			40 * time.Minute, true, "1 pod(s) not available (1/100 updated, 99 available)"},
		{"the deadline itself is not yet a stall", []Observation{obs(0, 100, 0, 1)}, 30 * time.Minute, false, ""},
		{"a pod going unavailable is no progress", []Observation{obs(0, 100, 1, 0), obs(20*time.Minute, 100, 1, 1)},
			31 * time.Minute, true, "1 pod(s) not available"},
		{"a finished rollout never stalls", []Observation{obs(0, 100, 100, 0)}, 48 * time.Hour, false, ""},
		{"a template the controller has not seen", []Observation{{DaemonSet: node, At: t0, Generation: 3, ObservedGeneration: 2, Desired: 4, Updated: 4, Available: 4}},
			31 * time.Minute, true, "has not observed generation 3 (it is at 2)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stalled, why := walk(c.obs...).Stalled(t0.Add(c.now), deadline)
			if stalled != c.wantStalled || !strings.Contains(why, c.wantWaiting) {
				t.Fatalf("stalled %v %q, want %v containing %q", stalled, why, c.wantStalled, c.wantWaiting)
			}
			if stalled && !strings.Contains(why, "calico-system/calico-node") {
				t.Fatalf("%q does not name the DaemonSet", why)
			}
		})
	}
}

// slowRollout updates one node every per, observed once per node.
func slowRollout(nodes int32, per time.Duration) []Observation {
	var out []Observation
	for i := int32(0); i < nodes; i++ {
		out = append(out, obs(time.Duration(i)*per, nodes, i, 1))
	}
	return out
}

func TestANewTemplateRestartsTheClocksAndKeepsThePace(t *testing.T) {
	s := walk(obs(0, 10, 0, 1), obs(10*time.Second, 10, 1, 1))
	next := obs(time.Hour, 10, 0, 1)
	next.Generation = 3
	s, _ = s.Step(next)
	if !s.LastProgressAt.Equal(t0.Add(time.Hour)) || s.Pace != 10*time.Second {
		t.Fatalf("after a new template: progress at %s, pace %s", s.LastProgressAt, s.Pace)
	}
	if stalled, _ := s.Stalled(t0.Add(time.Hour+time.Minute), 30*time.Minute); stalled {
		t.Fatal("a rollout that has just begun stalled")
	}
}

func TestStatusRoundTrip(t *testing.T) {
	s := walk(obs(0, 1000, 0, 1), obs(27*time.Second+123*time.Microsecond, 1000, 1, 1))
	st := s.ToStatus()
	if st.EstimatedTimeLeft == nil || st.PacePerNode == nil || st.DaemonSet != "calico-system/calico-node" {
		t.Fatalf("status %+v", st)
	}
	back := FromStatus(st)
	if back.Last.Updated != 1 || back.Last.Desired != 1000 || !back.UpdatedChangedAt.Equal(s.UpdatedChangedAt) ||
		back.Pace != s.Pace.Round(time.Millisecond) || back.Last.DaemonSet != node {
		t.Fatalf("round trip %+v, want %+v", back, s)
	}
	// A reconcile that rebuilt the State from the status and sees the same
	// status again makes no progress.
	again, advanced := back.Step(obs(time.Hour, 1000, 1, 1))
	if advanced != 0 || !again.LastProgressAt.Equal(s.LastProgressAt) {
		t.Fatalf("same status: advanced %d, progress at %s", advanced, again.LastProgressAt)
	}
	if (State{}).ToStatus() != nil || FromStatus(nil) != (State{}) {
		t.Fatal("the zero State is no status")
	}
}

func TestClock(t *testing.T) {
	var c Clock
	c = c.Observe("calico Progressing gen 3", t0)
	c = c.Observe("calico Progressing gen 3", t0.Add(20*time.Minute))
	if c.Passed(t0.Add(30*time.Minute), 30*time.Minute) {
		t.Fatal("passed at the deadline")
	}
	if !c.Passed(t0.Add(31*time.Minute), 30*time.Minute) {
		t.Fatal("not passed after the deadline without change")
	}
	c = c.Observe("calico Available gen 3", t0.Add(31*time.Minute))
	if c.Passed(t0.Add(40*time.Minute), 30*time.Minute) {
		t.Fatal("a change did not restart the clock")
	}
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 1400 * time.Millisecond: "1s", 61 * time.Second: "1m1s",
		4*time.Hour + 20*time.Minute + 29*time.Second: "4h20m", 37 * time.Hour: "37h0m",
	} {
		if got := Human(d); got != want {
			t.Errorf("Human(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestLengthWithACanary(t *testing.T) {
	const pace = 27 * time.Second
	tenth := intstr.FromString("10%")
	for _, c := range []struct {
		nodes, canary int
		speed         intstr.IntOrString
		want          time.Duration
	}{
		{1000, 0, tenth, 10 * pace},
		{1000, 3, tenth, 3*pace + 10*pace},
		{5000, 3, tenth, 3*pace + 10*pace},
		{1000, 3, intstr.FromInt32(1), 1000 * pace},
		{1000, 0, intstr.FromInt32(1), 1000 * pace},
		{3, 3, tenth, 3 * pace},
	} {
		got := Length(c.nodes, c.speed, c.canary, pace)
		if got != c.want {
			t.Errorf("%d nodes, canary %d, maxUnavailable %s: %s, want %s", c.nodes, c.canary, c.speed.String(), got, c.want)
		}
		if without := Length(c.nodes, c.speed, 0, pace); got-without > time.Duration(c.canary)*pace {
			t.Errorf("%d nodes, canary %d: adds %s, more than the canary's nodes one at a time", c.nodes, c.canary, got-without)
		}
	}
}
