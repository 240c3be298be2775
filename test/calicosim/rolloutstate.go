package calicosim

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// rolloutClock is where one DaemonSet's rollout stands: the template its
// nodes are rolling to, how many nodes run it available, and when each pod
// being replaced started. The other nodes (desired - done - replacing) run an
// older template.
type rolloutClock struct {
	hash    string
	desired int32
	done    int32
	// replacing holds the start of each pod replacement, oldest first.
	replacing []time.Time
	// rolled says a pod was replaced for this template: it counts as a
	// rollout.
	rolled bool
	// creating says the DaemonSet is new: its first pods are created, not
	// replacements, and no rollout.
	creating bool
}

// resume rebuilds the clock from the status when the simulator first sees a
// DaemonSet: a seeded one runs on every node; a new DaemonSet (never
// observed) starts its pods from none; one whose template the status
// describes resumes from its updated count; one whose template changed
// unobserved starts a rollout from none.
func resume(ds *appsv1.DaemonSet, desired int32) rolloutClock {
	st := ds.Status
	rc := rolloutClock{hash: templateHash(ds), desired: desired, rolled: true}
	switch {
	case st.ObservedGeneration == 0 && ds.Annotations[seededAnnotation] != "":
		// Seed writes the finished status right after the create; a
		// simulator that sees the DaemonSet in between must not start its
		// pods one by one (a rollout's length at thousands of nodes).
		rc.done = desired
	case st.ObservedGeneration == ds.Generation:
		rc.done = min(st.UpdatedNumberScheduled, desired)
	case st.ObservedGeneration == 0:
		rc.creating = true
	default:
		rc.rolled = false
	}
	return rc
}

// newTemplate moves the clock to a new template at now. Every node now runs an
// older template; a pod in the middle of its replacement runs a superseded one
// and, unavailable, is replaced again at once (the real controller deletes
// unavailable old pods first). It returns how many pods that replaced.
func (rc *rolloutClock) newTemplate(hash string, now time.Time) rolloutStarts {
	rc.hash, rc.done, rc.rolled, rc.creating = hash, 0, len(rc.replacing) > 0, false
	for i := range rc.replacing {
		rc.replacing[i] = now
	}
	return rolloutStarts{pods: len(rc.replacing), rollout: rc.rolled}
}

// resize follows the node count: a new node gets a pod of the current
// template; a node that left takes an old pod with it first.
func (rc *rolloutClock) resize(desired int32) {
	if desired > rc.desired {
		rc.done += desired - rc.desired
	}
	rc.desired = desired
	for rc.old() < 0 {
		switch {
		case rc.done > 0:
			rc.done--
		default:
			rc.replacing = rc.replacing[1:]
		}
	}
}

func (rc *rolloutClock) old() int32 {
	return rc.desired - rc.done - int32(len(rc.replacing))
}

// advance plays the rollout forward to now: pods whose replacement took step
// become available, and old pods are replaced while fewer than maxUnavailable
// are, each at the moment a slot became free. A held rollout stands still: its
// pods being replaced never become available.
func (rc *rolloutClock) advance(now time.Time, maxUnavailable int, step time.Duration, held bool) rolloutStarts {
	var started rolloutStarts
	// Slots free before this pass are filled now; a slot freed by a pod
	// that became available in the past is filled at that moment.
	at := now
	for {
		for len(rc.replacing) < maxUnavailable && rc.old() > 0 {
			rc.replacing = append(rc.replacing, at)
			started.pods++
			if !rc.rolled {
				rc.rolled, started.rollout = true, true
			}
		}
		if held {
			for i := range rc.replacing {
				rc.replacing[i] = now
			}
			return started
		}
		if len(rc.replacing) == 0 || rc.replacing[0].Add(step).After(now) {
			return started
		}
		at = rc.replacing[0].Add(step)
		rc.replacing = rc.replacing[1:]
		rc.done++
	}
}

// maxUnavailable is the real controller's: the strategy's value scaled to
// the desired nodes, rounded up, and at least 1.
func maxUnavailable(ds *appsv1.DaemonSet, desired int32) int {
	n := 1
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		if v, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(desired), true); err == nil {
			n = v
		}
	}
	return max(n, 1)
}

// templateHash identifies a pod template, as the controller-revision-hash
// label of the real controller's ControllerRevisions does.
func templateHash(ds *appsv1.DaemonSet) string {
	data, _ := json.Marshal(ds.Spec.Template)
	h := fnv.New64a()
	_, _ = h.Write(data)
	return strconv.FormatUint(h.Sum64(), 36)
}

// rolloutStarts is what one pass started: pod replacements, and whether the
// first of them made the template a rollout.
type rolloutStarts struct {
	pods    int
	rollout bool
}

// RolloutStats counts, for one DaemonSet, the rollouts the simulated
// DaemonSet controller carried out (templates that replaced at least one pod)
// and the pods it replaced.
type RolloutStats struct {
	Rollouts     int
	Replacements int
	// MostUnavailable is the most pods a rollout had unavailable at once:
	// the DaemonSet's maxUnavailable at work.
	MostUnavailable int
}

// rolloutCounter keeps RolloutStats for every DaemonSet; the zero value is
// ready to use.
type rolloutCounter struct {
	mu    sync.Mutex
	stats map[types.NamespacedName]RolloutStats
}

func (c *rolloutCounter) add(key types.NamespacedName, s rolloutStarts) {
	if s.pods == 0 && !s.rollout {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats == nil {
		c.stats = map[types.NamespacedName]RolloutStats{}
	}
	st := c.stats[key]
	st.Replacements += s.pods
	if s.rollout {
		st.Rollouts++
	}
	c.stats[key] = st
}

// unavailable notes how many pods a rollout of key has unavailable now.
func (c *rolloutCounter) unavailable(key types.NamespacedName, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats[key]
	if n <= st.MostUnavailable {
		return
	}
	if c.stats == nil {
		c.stats = map[types.NamespacedName]RolloutStats{}
	}
	st.MostUnavailable = n
	c.stats[key] = st
}

// Rollouts returns what the simulated DaemonSet controller did to DaemonSet
// namespace/name since the simulator started.
func (s *Simulator) Rollouts(namespace, name string) RolloutStats {
	s.rolloutStats.mu.Lock()
	defer s.rolloutStats.mu.Unlock()
	return s.rolloutStats.stats[types.NamespacedName{Namespace: namespace, Name: name}]
}
