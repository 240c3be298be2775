package controllers

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/record"
)

// seen is what this manager knows of the WindowsReadiness and its record
// between passes, so that a steady pass reads neither from the API server:
// the WindowsReadiness is read past the cache only when the cache may be
// behind, and the record only along with it.
type seen struct {
	mu sync.Mutex
	// uid and version are the WindowsReadiness's UID and the newest
	// resourceVersion this manager read past the cache or got back from
	// its own status write. A cache that shows that version holds the
	// status the previous pass wrote.
	uid     types.UID
	version string
	// newest is that version of the object, for a cache still behind it.
	newest *v1alpha1.WindowsReadiness
	// recordFor is the UID of the object the record below was read or
	// written for, empty when none was.
	recordFor types.UID
	// record is the record as last read or written, nil when there is none.
	record *record.Record
	// probeStarted is the probe round this manager started last, and
	// probeJudged what it judged of the last round it completed: a round in
	// the status counts only as one of these (probeRan).
	probeStarted string
	probeJudged  *probeVerdict
	// probeNodes are the Linux nodes, from the cache, as the probe round
	// this manager started last began: a round's verdict covers them.
	probeNodes []string
	// preflight is the passing verdict of the checks this manager ran last.
	preflight *preflightVerdict
}

// probeVerdict is what decides whether a completed probe round passed, and
// for which spec and rerun request it ran.
type probeVerdict struct {
	round, token, inputs              string
	completed                         int64
	planned, passed, failing, missing int32
}

func verdictOf(st *v1alpha1.ProbeStatus) probeVerdict {
	v := probeVerdict{round: st.Round, token: st.RerunToken, inputs: st.InputDigest,
		planned: st.PlannedPairs, passed: st.PassedPairs, failing: st.FailingPairs, missing: st.MissingReports}
	if st.CompletedAt != nil {
		// The status keeps seconds.
		v.completed = st.CompletedAt.Unix()
	}
	return v
}

// startedProbe remembers the probe round this manager started, and the
// Linux nodes it began on (sorted).
func (s *seen) startedProbe(round string, nodes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probeStarted, s.probeJudged, s.probeNodes = round, nil, nodes
}

// probeCovers says whether the probe round this manager started last began
// on every node of nodes (sorted): a Linux node that joined since has not
// been probed. A node that left takes nothing from the verdict on the others.
func (s *seen) probeCovers(nodes []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range nodes {
		if _, found := slices.BinarySearch(s.probeNodes, n); !found {
			return false
		}
	}
	return true
}

// judgedProbe remembers what this manager judged of a round.
func (s *seen) judgedProbe(st *v1alpha1.ProbeStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := verdictOf(st)
	s.probeJudged = &v
}

// probeRan says whether the probe round in the status is one this manager
// ran: started by it while under way, judged by it once completed, with the
// verdict the status shows. The manager's token may write the status, and a
// restarted manager cannot tell a round it ran from one written into it:
// any other round is run again before the first change.
func (s *seen) probeRan(st *v1alpha1.ProbeStatus) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.CompletedAt == nil {
		return st.Round != "" && st.Round == s.probeStarted
	}
	return s.probeJudged != nil && *s.probeJudged == verdictOf(st)
}

// preflightVerdict is the verdict of the checks this manager ran: for which
// object, on which inputs (the digest of what the cache holds), for which
// rerun request, and when.
type preflightVerdict struct {
	uid           types.UID
	digest, token string
	checks        []v1alpha1.PreflightCheck
	at            time.Time
}

// judgedPreflight remembers the verdict of the checks this manager ran. A
// verdict with a failed check is not remembered: the checks run again on
// every pass until they pass, so that a fix is seen as soon as a pass looks.
func (s *seen) judgedPreflight(v preflightVerdict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.preflight = nil
	if len(preflight.Failed(v.checks)) == 0 {
		v.checks = slices.Clone(v.checks)
		s.preflight = &v
	}
}

// preflightHolds returns the verdict this manager reached on the same
// inputs, for the same object and rerun request, no longer than maxAge
// before now: the manager's token may write the status, so a verdict counts
// only as one this manager reached. maxAge bounds how old a verdict may be
// on what the digest does not cover.
func (s *seen) preflightHolds(uid types.UID, digest, token string, now time.Time, maxAge time.Duration) ([]v1alpha1.PreflightCheck, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.preflight
	if v == nil || v.uid != uid || v.digest != digest || v.token != token || now.Sub(v.at) >= maxAge {
		return nil, false
	}
	return slices.Clone(v.checks), true
}

// newestFor is the newest version of the object this manager knows of,
// given cached, the cache's: cached itself when it is that version, the
// version this manager got back from its own write when the cache is still
// behind it (resourceVersions of one resource compare, as Kubernetes
// guarantees from 1.35, the oldest winready claims: KEP-5504), and
// not ok when the cache shows another writer's later version, another
// object of that name, or versions that do not compare.
func (s *seen) newestFor(cached *v1alpha1.WindowsReadiness) (*v1alpha1.WindowsReadiness, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version == "" || cached.UID != s.uid {
		return nil, false
	}
	if cached.ResourceVersion == s.version {
		return cached, true
	}
	if c, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, s.version); err == nil && c < 0 && s.newest != nil {
		return s.newest.DeepCopy(), true
	}
	return nil, false
}

// saw remembers wr as the newest version: read past the cache, or returned
// by a write.
func (s *seen) saw(wr *v1alpha1.WindowsReadiness) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uid, s.version, s.newest = wr.UID, wr.ResourceVersion, wr.DeepCopy()
}

// recordOf is the record as last read or written for the object uid.
func (s *seen) recordOf(uid types.UID) (*record.Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recordFor == "" || s.recordFor != uid {
		return nil, false
	}
	return copyRecord(s.record), true
}

func (s *seen) setRecord(uid types.UID, rec *record.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordFor, s.record = uid, copyRecord(rec)
}

// copyRecord copies rec, so that a pass's changes to the originals it shows
// do not reach what the manager remembers.
func copyRecord(rec *record.Record) *record.Record {
	if rec == nil {
		return nil
	}
	c := *rec
	c.Originals = rec.Originals.DeepCopy()
	return &c
}
