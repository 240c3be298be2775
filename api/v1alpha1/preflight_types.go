package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CheckResult is the outcome of one compatibility check.
// +kubebuilder:validation:Enum=Pass;Info;Warn;Fail
type CheckResult string

// The results of a check, from best to worst.
const (
	CheckPass CheckResult = "Pass"
	CheckInfo CheckResult = "Info"
	CheckWarn CheckResult = "Warn"
	CheckFail CheckResult = "Fail"
)

// PreflightCheck is one compatibility check and what to do about it.
type PreflightCheck struct {
	Name   string      `json:"name"`
	Result CheckResult `json:"result"`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Message string `json:"message,omitempty"`
}

// ProbePair is one direction between two machines that UDP 4789 did not pass.
type ProbePair struct {
	// From and To are "node-name (address)", or an address for extra targets.
	From string `json:"from"`
	To   string `json:"to"`
}

// MaxListed bounds the pairs and nodes listed in status, so that the object
// stays small however large the cluster.
const MaxListed = 20

// RoundState is where a round of agents on every Linux node stands, the UDP
// 4789 probe's or a pod network check's: started, planned (each agent given
// its peers), completed.
type RoundState struct {
	// Round identifies the round; the agents' plans and reports carry it.
	// +kubebuilder:validation:MaxLength=64
	Round string `json:"round"`
	// RerunToken is the token of the rerun annotation the round ran for,
	// empty when none was set: a new value of the annotation asks for a new
	// round.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	RerunToken string `json:"rerunToken,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// PlannedAt is when the agents were given their peers.
	// +optional
	PlannedAt *metav1.Time `json:"plannedAt,omitempty"`
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Nodes is how many Linux nodes were expected; Paired how many agents
	// were given their peers.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// +optional
	Paired int32 `json:"paired,omitempty"`
}

// ProbeStatus is the outcome of a round of the UDP 4789 probe.
type ProbeStatus struct {
	RoundState `json:",inline"`
	// Generation is the spec generation the round started at. Kept for
	// readers of older statuses: a round is keyed on InputDigest, so a spec
	// edit of other fields (paused, approvedSteps, acknowledge...) does not
	// probe again.
	Generation int64 `json:"generation"`
	// InputDigest is a digest of the spec fields the round ran for
	// (spec.preflight.extraTargets and probeTimeout): a change probes again.
	// A Linux node that joined since the round began does too, once the
	// round is over.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	InputDigest string `json:"inputDigest,omitempty"`
	// Skipped records spec.preflight.skipNetworkProbe, acknowledged by a person.
	// +optional
	Skipped bool `json:"skipped,omitempty"`
	// PlannedPairs, PassedPairs and FailingPairs count directed pairs,
	// extra targets included.
	// +optional
	PlannedPairs int32 `json:"plannedPairs,omitempty"`
	// +optional
	PassedPairs int32 `json:"passedPairs,omitempty"`
	// +optional
	FailingPairs int32 `json:"failingPairs,omitempty"`
	// FirstFailing lists the first failing pairs.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	FirstFailing []ProbePair `json:"firstFailing,omitempty"`
	// MissingReports counts nodes whose agent did not report in time.
	// +optional
	MissingReports int32 `json:"missingReports,omitempty"`
	// FirstMissing lists the first of them.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	FirstMissing []string `json:"firstMissing,omitempty"`
	// MissingReasons says, for the nodes of FirstMissing whose agent said
	// why it could not probe (it came up too late, say), what it said: the
	// reports are gone once the round is summed up here.
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=node
	// +optional
	MissingReasons []MissingReason `json:"missingReasons,omitempty"`
}

// MissingReason is why a node's agent did not probe, in its own words.
type MissingReason struct {
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason"`
}

// PreflightStatus is the last preflight's outcome.
type PreflightStatus struct {
	// Probe is the last round of the UDP 4789 probe.
	// +optional
	Probe *ProbeStatus `json:"probe,omitempty"`
	// CompletedAt is when the checks last completed with the verdicts they
	// show: a check run again with the same verdicts leaves it as it was.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// InputDigest is a digest of what the checks were last run on, as read
	// from winready's cache: Installation default's spec, labels,
	// annotations and Calico version, Installation overlay, the Nodes'
	// names, OS and role labels and VXLAN tunnel addresses, the
	// services-endpoint ConfigMap's address, the calico-system DaemonSets'
	// generations, and spec.preflight.acknowledge, spec.windowsNodes.expected
	// and spec.apiServer. The checks are run again, reading the cluster past
	// the cache, when it changes, on a new value of the rerun-preflight
	// annotation, after a failed check, and once the verdict is older than
	// the preflight's retry interval (5 minutes), for what the cache does not
	// hold (IP pools, policies, BGP peers, IPAM blocks, other DaemonSets).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	InputDigest string `json:"inputDigest,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Checks []PreflightCheck `json:"checks,omitempty"`
}
