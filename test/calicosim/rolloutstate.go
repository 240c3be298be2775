package calicosim

import (
	"encoding/json"
	"hash/fnv"
	"maps"
	"slices"
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
	// pods says which node's pod is which, for counting per node.
	pods podBook
}

// pass plays one pass of the controller at now over nodes, for a DaemonSet
// whose template is hash, and counts what it replaced into stats under key.
func (rc *rolloutClock) pass(stats *rolloutCounter, key types.NamespacedName, hash string, nodes []string, now time.Time,
	maxUnavailable int, step time.Duration, held bool) {
	if hash != rc.hash {
		stats.add(key, rc.newTemplate(hash, now))
		again := rc.pods.replaceInflight(hash)
		stats.replacedOn(key, again)
		rc.pods.markReplaced(again)
	}
	rc.resize(int32(len(nodes)))
	rc.pods.followNodes(nodes, rc.hash)
	started := rc.advance(now, maxUnavailable, step, held)
	replaced := rc.pods.start(started.pods, rc.hash)
	rc.pods.markReplaced(replaced)
	rc.pods.settle(len(rc.replacing))
	if !rc.creating {
		stats.add(key, started)
		stats.replacedOn(key, replaced)
		stats.unavailable(key, len(rc.replacing))
	}
}

// podBook says which node runs which template. The counts of rolloutClock
// decide how many pods are replaced; the book decides which, in the order of
// the node names, so that replacements are counted per node. A node whose pod
// runs the current template is not replaced again.
type podBook struct {
	// hash is the template of each node's pod ("" for one older than any
	// the simulator saw).
	hash map[string]string
	// inflight are the nodes whose pod is being replaced, in the order of
	// rolloutClock.replacing.
	inflight []string
	// replaced are the nodes whose pod a rollout replaced while the
	// simulator ran: only they have a Pod object (podsToWrite), so that a
	// cluster of thousands of seeded nodes costs no write until it rolls.
	replaced map[string]bool
	// written is the template generation of each node's Pod as last
	// written.
	written map[string]string
}

// markReplaced notes the nodes whose pod is replaced.
func (b *podBook) markReplaced(nodes []string) {
	if b.replaced == nil {
		b.replaced = map[string]bool{}
	}
	for _, n := range nodes {
		b.replaced[n] = true
	}
}

// podsToWrite are the replaced nodes whose new pod is available on the
// current template and whose Pod does not say so yet, sorted.
func (b *podBook) podsToWrite(current, generation string) []string {
	var out []string
	for n := range b.replaced {
		if _, ok := b.hash[n]; !ok {
			delete(b.replaced, n)
			delete(b.written, n)
			continue
		}
		if b.hash[n] == current && !slices.Contains(b.inflight, n) && b.written[n] != generation {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// wrote notes that node's Pod runs generation.
func (b *podBook) wrote(node, generation string) {
	if b.written == nil {
		b.written = map[string]string{}
	}
	b.written[node] = generation
}

// seedBook names the nodes of a clock resumed from the status: the first
// done of them run the current template.
func (rc *rolloutClock) seedBook(nodes []string) {
	rc.pods = podBook{hash: map[string]string{}}
	for i, n := range nodes {
		if int32(i) < rc.done {
			rc.pods.hash[n] = rc.hash
		} else {
			rc.pods.hash[n] = ""
		}
	}
}

// followNodes adds the nodes that joined, with a pod of the current
// template, and forgets those that left.
func (b *podBook) followNodes(nodes []string, current string) {
	present := map[string]bool{}
	for _, n := range nodes {
		present[n] = true
		if _, ok := b.hash[n]; !ok {
			b.hash[n] = current
		}
	}
	for n := range b.hash {
		if !present[n] {
			delete(b.hash, n)
		}
	}
	b.inflight = slices.DeleteFunc(b.inflight, func(n string) bool { return !present[n] })
}

// replaceInflight gives the pods being replaced the current template again,
// as newTemplate replaces them at once; it returns their nodes.
func (b *podBook) replaceInflight(current string) []string {
	for _, n := range b.inflight {
		b.hash[n] = current
	}
	return slices.Clone(b.inflight)
}

// start replaces k pods of older templates and returns their nodes.
func (b *podBook) start(k int, current string) []string {
	if k == 0 {
		return nil
	}
	var names []string
	for n, h := range b.hash {
		if h != current && !slices.Contains(b.inflight, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	names = names[:min(k, len(names))]
	for _, n := range names {
		b.hash[n] = current
	}
	b.inflight = append(b.inflight, names...)
	return names
}

// settle keeps as many nodes in flight as the clock has pods being
// replaced: the oldest finished first.
func (b *podBook) settle(replacing int) {
	if drop := len(b.inflight) - replacing; drop > 0 {
		b.inflight = b.inflight[drop:]
	}
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
// the desired nodes, rounded up, and at least 1. Under OnDelete the
// controller replaces no pod (a pod deleted by someone is recreated from the
// current template; nothing here deletes one), and a pod of the current
// template is not replaced again once RollingUpdate is back.
func maxUnavailable(ds *appsv1.DaemonSet, desired int32) int {
	if ds.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return 0
	}
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
	// PerNode counts the pods replaced on each node.
	PerNode map[string]int
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

// replacedOn counts a pod replaced on each of nodes.
func (c *rolloutCounter) replacedOn(key types.NamespacedName, nodes []string) {
	if len(nodes) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats == nil {
		c.stats = map[types.NamespacedName]RolloutStats{}
	}
	st := c.stats[key]
	if st.PerNode == nil {
		st.PerNode = map[string]int{}
	}
	for _, n := range nodes {
		st.PerNode[n]++
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
	st := s.rolloutStats.stats[types.NamespacedName{Namespace: namespace, Name: name}]
	st.PerNode = maps.Clone(st.PerNode)
	return st
}
