package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Phase summarises the status. It is computed from the conditions and never
// read back as input.
// +kubebuilder:validation:Enum=Pending;Preflight;Planned;Migrating;AwaitingApproval;Ready;RollingBack;RolledBack;Paused;Stalled
type Phase string

// The phases.
const (
	PhasePending   Phase = "Pending"
	PhasePreflight Phase = "Preflight"
	// PhasePlanned: a dry run's plan is in status.plan; nothing was changed.
	PhasePlanned Phase = "Planned"
	// PhaseAwaitingApproval: a disruptive step waits for spec.approvedSteps.
	PhaseAwaitingApproval Phase = "AwaitingApproval"
	PhaseMigrating        Phase = "Migrating"
	PhaseReady            Phase = "Ready"
	PhaseRollingBack      Phase = "RollingBack"
	PhaseRolledBack       Phase = "RolledBack"
	PhasePaused           Phase = "Paused"
	PhaseStalled          Phase = "Stalled"
)

// Phases lists every phase, in the order of the enum above.
var Phases = []Phase{PhasePending, PhasePreflight, PhasePlanned, PhaseMigrating, PhaseAwaitingApproval,
	PhaseReady, PhaseRollingBack, PhaseRolledBack, PhasePaused, PhaseStalled}

// StepName names one step of the migration.
// +kubebuilder:validation:Enum=StrictAffinity;Encapsulation;BGP;ServicesEndpoint;ServiceCIDRs;WindowsDataplane
type StepName string

// The steps, in the order a migration runs them.
const (
	StepStrictAffinity   StepName = "StrictAffinity"
	StepEncapsulation    StepName = "Encapsulation"
	StepBGP              StepName = "BGP"
	StepServicesEndpoint StepName = "ServicesEndpoint"
	StepServiceCIDRs     StepName = "ServiceCIDRs"
	StepWindowsDataplane StepName = "WindowsDataplane"
)

// ApprovableSteps are the steps spec.approvedSteps admits: the disruptive
// ones, which spec.requireApproval holds. The same list as the enum of
// approvedSteps' items in WindowsReadinessSpec (spec_types.go).
var ApprovableSteps = []StepName{StepEncapsulation, StepBGP, StepServicesEndpoint}

// StepNames are the steps in the order a migration runs them.
var StepNames = []StepName{StepStrictAffinity, StepEncapsulation, StepBGP, StepServicesEndpoint, StepServiceCIDRs,
	StepWindowsDataplane}

// StepState is where one step stands.
// +kubebuilder:validation:Enum=Pending;InProgress;Completed;Reverting;Reverted
type StepState string

// The states of a step.
const (
	StepPending    StepState = "Pending"
	StepInProgress StepState = "InProgress"
	StepCompleted  StepState = "Completed"
	StepReverting  StepState = "Reverting"
	StepReverted   StepState = "Reverted"
)

// StepStatus records one step.
type StepStatus struct {
	// +required
	Name StepName `json:"name"`
	// +required
	State StepState `json:"state"`
	// Changed is true when the operator wrote to the cluster in this step;
	// false when the cluster already held the value.
	// +optional
	Changed bool `json:"changed,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// Reverts counts how often another field manager put back the value
	// this step had changed.
	// +optional
	Reverts int32 `json:"reverts,omitempty"`
	// Target is a digest of the target the step applied when it finished,
	// for the steps whose target comes from the spec (ServicesEndpoint,
	// ServiceCIDRs): a spec edit after that re-runs the step, and is never
	// taken for another field manager's revert.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Target string `json:"target,omitempty"`
	// LastProgressAt is when what the step waits for last moved (a node
	// updated, a status changed): the progress deadline counts from here.
	// +optional
	LastProgressAt *metav1.Time `json:"lastProgressAt,omitempty"`
}

// PlannedChange is one change a migration would make.
type PlannedChange struct {
	Step StepName `json:"step"`
	// Object is the object changed, e.g. "Installation default".
	Object string `json:"object"`
	// Field is the field changed, e.g. "spec.calicoNetwork.bgp".
	Field string `json:"field"`
	// Before and After are the values, "<absent>" where there is none.
	Before string `json:"before"`
	After  string `json:"after"`
}
