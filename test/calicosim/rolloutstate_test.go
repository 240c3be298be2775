package calicosim

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRolloutReplacesMaxUnavailableNodesAtATime(t *testing.T) {
	cases := []struct {
		name           string
		maxUnavailable int
		at             time.Duration
		wantDone       int32
		wantReplacing  int
	}{
		{"one node at a time, first still starting", 1, 26 * time.Millisecond, 0, 1},
		{"one node at a time, after four steps", 1, 4*27*time.Millisecond + time.Millisecond, 4, 1},
		{"ten nodes at a time, after two steps", 10, 2*27*time.Millisecond + time.Millisecond, 20, 10},
		{"all done", 10, time.Second, 100, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := rolloutClock{hash: "a", desired: 100, done: 100}
			rc.newTemplate("b", start)
			rc.advance(start, c.maxUnavailable, 27*time.Millisecond, false)
			rc.advance(start.Add(c.at), c.maxUnavailable, 27*time.Millisecond, false)
			if rc.done != c.wantDone || len(rc.replacing) != c.wantReplacing {
				t.Fatalf("done %d replacing %d, want %d and %d", rc.done, len(rc.replacing), c.wantDone, c.wantReplacing)
			}
		})
	}
}

// play runs a rollout of 10 nodes at maxUnavailable 1 with the template
// changes at the given times, to the end, and returns what it counted.
func play(changes ...time.Duration) RolloutStats {
	var c rolloutCounter
	nodes := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}
	rc := rolloutClock{hash: "0", desired: 10, done: 10}
	rc.seedBook(nodes)
	step := time.Second
	hashes := "abcdefgh"
	current := "0"
	for i, at := range changes {
		now := start.Add(at)
		rc.pass(&c, nodeKey, current, nodes, now, 1, step, false)
		current = hashes[i : i+1]
		rc.pass(&c, nodeKey, current, nodes, now, 1, step, false)
	}
	// Passes as the controller runs them, one per pod that becomes available.
	for at := time.Duration(0); at < time.Minute; at += step {
		rc.pass(&c, nodeKey, current, nodes, start.Add(changes[len(changes)-1]+at+time.Millisecond), 1, step, false)
	}
	return c.stats[nodeKey]
}

// perNode is every one of the ten nodes replaced n times, except those
// named in more, replaced n+1 times.
func perNode(n int, more ...string) map[string]int {
	m := map[string]int{}
	for i := range 10 {
		m[fmt.Sprintf("n%d", i)] = n
	}
	for _, name := range more {
		m[name]++
	}
	return m
}

var nodeKey = daemonSetKey(nodeDaemonSet)

func TestRolloutCount(t *testing.T) {
	cases := []struct {
		name    string
		changes []time.Duration
		want    RolloutStats
	}{
		{"one change", []time.Duration{0}, RolloutStats{Rollouts: 1, Replacements: 10, PerNode: perNode(1), MostUnavailable: 1}},
		// Between two changes no pass of the controller ran: the first
		// template never replaced a pod.
		{"two changes seen in one pass", nil, RolloutStats{Rollouts: 1, Replacements: 10}},
		{"a second change in the middle of the first node", []time.Duration{0, 500 * time.Millisecond},
			RolloutStats{Rollouts: 2, Replacements: 11, PerNode: perNode(1, "n0"), MostUnavailable: 1}},
		{"a second change after three nodes", []time.Duration{0, 3500 * time.Millisecond},
			RolloutStats{Rollouts: 2, Replacements: 14, PerNode: perNode(1, "n0", "n1", "n2", "n3"), MostUnavailable: 1}},
		{"two full rollouts", []time.Duration{0, time.Minute}, RolloutStats{Rollouts: 2, Replacements: 20, PerNode: perNode(2), MostUnavailable: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got RolloutStats
			if c.changes == nil {
				got = twoChangesInOnePass()
			} else {
				got = play(c.changes...)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func twoChangesInOnePass() RolloutStats {
	var c rolloutCounter
	rc := rolloutClock{hash: "0", desired: 10, done: 10}
	c.add(nodeKey, rc.newTemplate("a", start))
	c.add(nodeKey, rc.newTemplate("b", start))
	c.add(nodeKey, rc.advance(start, 1, time.Second, false))
	c.add(nodeKey, rc.advance(start.Add(time.Hour), 1, time.Second, false))
	return c.stats[nodeKey]
}

func TestAHeldRolloutStandsStill(t *testing.T) {
	rc := rolloutClock{hash: "a", desired: 3, done: 3}
	rc.newTemplate("b", start)
	rc.advance(start, 1, time.Second, true)
	rc.advance(start.Add(time.Hour), 1, time.Second, true)
	if rc.done != 0 || len(rc.replacing) != 1 {
		t.Fatalf("held: done %d replacing %d", rc.done, len(rc.replacing))
	}
	rc.advance(start.Add(time.Hour+3*time.Second+time.Millisecond), 1, time.Second, false)
	if rc.done != 3 {
		t.Fatalf("released: done %d, want 3", rc.done)
	}
}

func TestRolloutFollowsTheNodes(t *testing.T) {
	rc := rolloutClock{hash: "a", desired: 4, done: 4}
	rc.newTemplate("b", start)
	rc.advance(start, 1, time.Second, false)
	rc.resize(6)
	if rc.done != 2 || rc.old() != 3 {
		t.Fatalf("two nodes joined: done %d old %d, want 2 and 3", rc.done, rc.old())
	}
	rc.resize(1)
	if rc.done+int32(len(rc.replacing))+rc.old() != 1 || rc.old() < 0 {
		t.Fatalf("nodes left: done %d replacing %d old %d", rc.done, len(rc.replacing), rc.old())
	}
}

// A DaemonSet that Seed creates already runs on every node: a simulator that
// sees it before Seed writes its status must not start its pods one by one,
// which at thousands of nodes takes as long as a rollout.
func TestResumeSeededDaemonSetRunsEverywhere(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: nodeDaemonSet, Generation: 1,
		Annotations: map[string]string{seededAnnotation: "running"}}}
	rc := resume(ds, 5000)
	if started := rc.advance(start, 1, 27*time.Millisecond, false); rc.done != 5000 || started.pods != 0 || rc.creating {
		t.Fatalf("seeded DaemonSet: done %d, %d pods started, creating %v; want 5000, 0, false", rc.done, started.pods, rc.creating)
	}

	delete(ds.Annotations, seededAnnotation)
	rc = resume(ds, 5000)
	if rc.advance(start, 1, 27*time.Millisecond, false); !rc.creating || rc.done != 0 {
		t.Fatalf("new DaemonSet: done %d, creating %v; want its pods started from none", rc.done, rc.creating)
	}
}
