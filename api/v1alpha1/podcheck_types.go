package v1alpha1

// PodCheckVerdict is what a pair's pod network checks say.
// +kubebuilder:validation:Enum=Pass;AsBaseline;ChecksumOffload;MTU;VXLANPath;Other
type PodCheckVerdict string

// PodPairResult is one directed pair of nodes whose pods' checks failed.
type PodPairResult struct {
	// From and To are node names: the pod on From tested the pod on To.
	// +kubebuilder:validation:MaxLength=253
	From string `json:"from"`
	// +kubebuilder:validation:MaxLength=253
	To string `json:"to"`
	// Verdict is AsBaseline when the pair failed the same way before the
	// first change.
	Verdict PodCheckVerdict `json:"verdict"`
	// Checks are the outcomes of ICMP, small TCP and full-size TCP, such as
	// "P,P,F" (P passed, F failed, - not run).
	// +kubebuilder:validation:MaxLength=8
	Checks string `json:"checks"`
	// PathMTU is the largest packet that reached To with Don't Fragment set,
	// measured when only full-size TCP failed.
	// +optional
	PathMTU int32 `json:"pathMTU,omitempty"`
}

// PodCheckRound is one round of the pod network check. Its pods are paired
// (PlannedAt, Paired) once they serve.
type PodCheckRound struct {
	RoundState `json:",inline"`
	// Trigger is Baseline (before the first change), the step after which
	// the round ran, or Canary (status.canary.round).
	// +kubebuilder:validation:Enum=Baseline;Encapsulation;BGP;ServicesEndpoint;Canary
	Trigger string `json:"trigger"`
	// PodMTU is the MTU the pods reported.
	// +optional
	PodMTU int32 `json:"podMTU,omitempty"`
	// TestedPairs, FailingPairs and WorsePairs count directed pairs; worse
	// ones fail a check that passed in the baseline.
	// +optional
	TestedPairs int32 `json:"testedPairs,omitempty"`
	// +optional
	FailingPairs int32 `json:"failingPairs,omitempty"`
	// +optional
	WorsePairs int32 `json:"worsePairs,omitempty"`
	// Failing lists the first failing pairs, worse ones first.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Failing []PodPairResult `json:"failing,omitempty"`
	// DNSFailing, ServiceFailing and Missing list the first nodes whose pod
	// could not resolve kubernetes.default, could not reach the Service
	// ClusterIP, or did not report.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	DNSFailing []string `json:"dnsFailing,omitempty"`
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	ServiceFailing []string `json:"serviceFailing,omitempty"`
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Missing []string `json:"missing,omitempty"`
	// Worse is true when the pod network is worse than in the baseline.
	// +optional
	Worse bool `json:"worse,omitempty"`
	// Diagnosis names what broke, the pairs and the fix.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Diagnosis string `json:"diagnosis,omitempty"`
}

// PodNetworkCheckStatus is the pod network check's baseline and last round.
type PodNetworkCheckStatus struct {
	// Disabled records spec.podNetworkCheck.disabled.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// Seed orders the pairs of every round, so that a round after a step
	// tests the pairs the baseline tested.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Seed string `json:"seed,omitempty"`
	// +optional
	Baseline *PodCheckRound `json:"baseline,omitempty"`
	// Last is the last round after a step.
	// +optional
	Last *PodCheckRound `json:"last,omitempty"`
	// Passed lists the steps after which the pod network was proven.
	// +kubebuilder:validation:MaxItems=3
	// +listType=set
	// +optional
	Passed []StepName `json:"passed,omitempty"`
	// Reverted is the step reverted because the pod network got worse after
	// it (spec.podNetworkCheck.onFailure: Revert).
	// +optional
	Reverted StepName `json:"reverted,omitempty"`
}

// CanaryState is where the canary of a rollout stands.
// +kubebuilder:validation:Enum=Planned;Rolling;Checking;Passed;Failed
type CanaryState string

const (
	// CanaryPlanned means a dry run's plan: the rollout would begin with
	// this canary.
	CanaryPlanned CanaryState = "Planned"
	// CanaryRolling means calico-node rolls one node at a time until the
	// canary's nodes run the new one.
	CanaryRolling CanaryState = "Rolling"
	// CanaryChecking means the pod network check runs between the canary's
	// nodes and the nodes on the old calico-node.
	CanaryChecking CanaryState = "Checking"
	// CanaryPassed means the check passed; the rollout goes on at
	// spec.rollout.maxUnavailable.
	CanaryPassed CanaryState = "Passed"
	// CanaryFailed means the check found the pod network worse; the changes that
	// started the rollout are reverted and the migration stops.
	CanaryFailed CanaryState = "Failed"
)

// CanaryStatus is the canary of one calico-node rollout.
type CanaryStatus struct {
	// Steps are the steps whose write started the rollout, the first the
	// one whose turn made it.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Steps []StepName `json:"steps,omitempty"`
	// Direction is the direction of the write.
	// +optional
	Direction Direction `json:"direction,omitempty"`
	// State is where the canary stands.
	// +optional
	State CanaryState `json:"state,omitempty"`
	// Size is how many nodes the canary waits for.
	// +optional
	Size int32 `json:"size,omitempty"`
	// FromTemplateGeneration is calico-node's template generation before the
	// write: a pod of a later one runs the new calico-node.
	// +optional
	FromTemplateGeneration int64 `json:"fromTemplateGeneration,omitempty"`
	// Slowed says winready set calico-node's maxUnavailable to 1 for the
	// canary, to be raised to spec.rollout.maxUnavailable once it passes.
	// +optional
	Slowed bool `json:"slowed,omitempty"`
	// Nodes are the canary's nodes: the first to run the new calico-node.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// Round is the pod network check between the canary's nodes and the
	// others.
	// +optional
	Round *PodCheckRound `json:"round,omitempty"`
	// Reverted says the changes that started the rollout were taken back
	// after a failed check.
	// +optional
	Reverted bool `json:"reverted,omitempty"`
}
