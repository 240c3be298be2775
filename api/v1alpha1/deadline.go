package v1alpha1

import "time"

// DefaultProgressDeadline is the progress deadline when neither
// spec.progressDeadline nor its deprecated name spec.phaseTimeout is set.
const DefaultProgressDeadline = 30 * time.Minute

// EffectiveProgressDeadline is how long a step may go without progress:
// progressDeadline, else the deprecated phaseTimeout, else 30m. Objects
// stored before progressDeadline existed carry phaseTimeout (then defaulted
// to 30m), so they keep their value.
func (s *WindowsReadinessSpec) EffectiveProgressDeadline() time.Duration {
	switch {
	case s.ProgressDeadline != nil:
		return s.ProgressDeadline.Duration
	case s.PhaseTimeout != nil:
		return s.PhaseTimeout.Duration
	}
	return DefaultProgressDeadline
}
