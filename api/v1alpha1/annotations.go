package v1alpha1

// Annotations of the WindowsReadiness that a person sets to ask the manager
// for something; any new value asks again (kubectl winready retry and rerun
// set them to the time). The manager reads each value only as a request:
// what it holds means nothing.
const (
	// RetryAnnotation wakes the manager: after fixing what a Stalled
	// condition names, it looks again at once. Any annotation's change
	// does; this one is kept for that alone.
	RetryAnnotation = "winready.io/retry"
	// RerunPreflightAnnotation asks for a new preflight: any new value does.
	RerunPreflightAnnotation = "winready.io/rerun-preflight"
	// RerunPodCheckAnnotation asks for the pod network check to run again
	// after a failed round: any new value does.
	RerunPodCheckAnnotation = "winready.io/rerun-podcheck"
)
