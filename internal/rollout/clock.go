package rollout

import "time"

// Clock is a progress deadline for waits that are not a DaemonSet rollout
// (a TigeraStatus catching up, an IP pool being rewritten): anything the wait
// observes is summed up as a string, and any change of it is progress.
type Clock struct {
	// Seen is what the wait last observed.
	Seen string
	// Since is when Seen last changed.
	Since time.Time
}

// Observe folds what the wait sees now into c.
func (c Clock) Observe(seen string, now time.Time) Clock {
	if c.Since.IsZero() || seen != c.Seen {
		return Clock{Seen: seen, Since: now}
	}
	return c
}

// Passed says whether nothing changed for longer than deadline.
func (c Clock) Passed(now time.Time, deadline time.Duration) bool {
	return !c.Since.IsZero() && now.Sub(c.Since) > deadline
}
