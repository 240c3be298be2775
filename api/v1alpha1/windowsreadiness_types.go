package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Name is the only name a WindowsReadiness may have: a cluster has one Calico
// installation, so it has one migration.
const Name = "default"

// WindowsNodeGateLabel on Installation default, with the value of
// GateDisabled, lifts the half of the Windows join gate that waits for the
// Tigera operator to roll out the Windows dataplane; spec.windowsNodeGate
// Disabled lifts the half that reads the WindowsReadiness. The manager
// cannot write this label: a person's switch, where the policy that reads
// the Installation can see it.
const WindowsNodeGateLabel = "winready.io/windows-node-gate"

// Direction says which way the operator moves the cluster.
// +kubebuilder:validation:Enum=Migrate;Rollback
type Direction string

const (
	// DirectionMigrate makes the cluster ready for Windows nodes.
	DirectionMigrate Direction = "Migrate"
	// DirectionRollback restores every value the migration changed.
	DirectionRollback Direction = "Rollback"
)

// GateMode switches the Windows join gate on or off.
// +kubebuilder:validation:Enum=Enabled;Disabled
type GateMode string

// The gate's modes.
const (
	GateEnabled  GateMode = "Enabled"
	GateDisabled GateMode = "Disabled"
)

// Acknowledgement names something that stops working when BGP is turned off,
// or a risk of the cluster's shape, that a person has accepted.
// +kubebuilder:validation:Enum=BGPPeers;ServiceAdvertisement;HelmManagedInstallation;UntestedCalicoVersion;ForeignRecord
type Acknowledgement string

const (
	// AcknowledgeBGPPeers accepts that every BGPPeer session ends.
	AcknowledgeBGPPeers Acknowledgement = "BGPPeers"
	// AcknowledgeServiceAdvertisement accepts that service cluster, external and
	// load balancer addresses are no longer advertised over BGP.
	AcknowledgeServiceAdvertisement Acknowledgement = "ServiceAdvertisement"
	// AcknowledgeHelmManagedInstallation accepts that the Installation is
	// rendered by a Helm chart whose values a person changes the same way,
	// since the next helm upgrade puts back whatever winready changed.
	AcknowledgeHelmManagedInstallation Acknowledgement = "HelmManagedInstallation"
	// AcknowledgeUntestedCalicoVersion accepts a Calico older than the
	// oldest version winready is tested with.
	AcknowledgeUntestedCalicoVersion Acknowledgement = "UntestedCalicoVersion"
	// AcknowledgeForeignRecord accepts a record of the originals (ConfigMap
	// winready-originals) that this WindowsReadiness did not write: one left
	// by a WindowsReadiness deleted and applied again, by an earlier
	// winready, or created by anyone else. The migration goes on from its
	// values and a rollback writes them back, so a person reads them (the
	// condition OriginalsRecorded names them) before accepting. In a
	// migration it also accepts originals that status.originals shows and
	// no record holds (a winready from before the record kept them there
	// alone): they become this WindowsReadiness's record.
	AcknowledgeForeignRecord Acknowledgement = "ForeignRecord"
)

// IPv4CIDR is an IPv4 network in canonical form, such as 10.96.0.0/12.
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4",message="must be an IPv4 CIDR such as 10.96.0.0/12: Windows nodes support IPv4 only"
// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || string(cidr(self).masked()) == self",message="must be a network address in canonical form (host bits zero), such as 10.96.0.0/12"
type IPv4CIDR string

// IPv4Address is a single IPv4 address, such as 10.0.1.20.
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4",message="must be an IPv4 address such as 10.0.1.20"
type IPv4Address string

// APIServerEndpoint is the address calico-node uses to reach the API server
// directly, without kube-proxy.
type APIServerEndpoint struct {
	// Host is an IPv4 address (preferred) or a DNS name of the API server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || ip(self).family() == 4",message="must be an IPv4 address or a DNS name: Calico for Windows does not support IPv6"
	// +kubebuilder:validation:XValidation:rule="isIP(self) || (!self.matches('^[0-9.]+$') && self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))",message="must be an IPv4 address or a lower-case DNS name such as api.example.com"
	Host string `json:"host"`

	// Port is the API server's TCP port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// PreflightSpec tunes the checks run before the first change.
type PreflightSpec struct {
	// ExtraTargets are addresses, such as those of future Windows nodes, that
	// every Linux node must reach on UDP 4789. Run `winready respond` on each.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	ExtraTargets []IPv4Address `json:"extraTargets,omitempty"`

	// ProbeTimeout bounds one round of the UDP 4789 probe.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('10m')",message="must be between 1s and 10m"
	// +kubebuilder:default="30s"
	// +optional
	ProbeTimeout *metav1.Duration `json:"probeTimeout,omitempty"`

	// SkipNetworkProbe skips the UDP 4789 probe, for clusters where
	// hostNetwork pods are not allowed or the path was verified another way.
	// The skip is recorded and shown as a warning; compatibility checks still run.
	// +optional
	SkipNetworkProbe bool `json:"skipNetworkProbe,omitempty"`

	// Acknowledge lists what turning BGP off will end and a person accepts.
	// Without it, BGPPeers or service address advertisement fail the preflight,
	// and so do an Installation that a Helm release renders and a Calico older
	// than the oldest tested version. ForeignRecord accepts a record of the
	// originals this WindowsReadiness did not write, in a migration and in a
	// rollback, and, in a migration, originals the status shows that no
	// record holds; without it, both stop before any change.
	// +kubebuilder:validation:MaxItems=5
	// +listType=set
	// +optional
	Acknowledge []Acknowledgement `json:"acknowledge,omitempty"`
}

// WindowsNodesSpec describes the Windows nodes the cluster is made ready for.
type WindowsNodesSpec struct {
	// Expected is how many Windows nodes will join. With strictAffinity each
	// needs a free IPAM block of its own; the preflight fails when the
	// enabled IPv4 pools have fewer.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5000
	// +optional
	Expected *int32 `json:"expected,omitempty"`

	// JoinTimeout is how long a Windows node may take to join once the
	// cluster is Ready (counted from the later of the node's creation and
	// Ready): its calico-node-windows pod Ready, an IPAM block affine to it
	// and the node Ready. Past it, WindowsNodesHealthy is False and an Event
	// names the node and what it waits for.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="must be between 1m and 24h"
	// +kubebuilder:default="10m"
	// +optional
	JoinTimeout *metav1.Duration `json:"joinTimeout,omitempty"`
}

// RolloutSpec tunes how calico-node rolls out during the migration.
type RolloutSpec struct {
	// Conservative makes each change (BGP off, the services endpoint, the
	// service network, the Windows dataplane) reach the Tigera operator on
	// its own, so that calico-node rolls out once per change that
	// re-renders it. By default the four reach it in one write, with
	// calico-node held until the operator has read them all, and
	// calico-node rolls out once.
	// +optional
	Conservative bool `json:"conservative,omitempty"`

	// MaxUnavailable is calico-node's rolling-update maxUnavailable while the
	// migration, or a rollback, rolls calico-node out: more nodes at a time
	// make a rollout faster and take the pod network from more nodes at
	// once. winready writes it into the Installation's
	// spec.nodeUpdateStrategy together with the first change that re-renders
	// calico-node, records the value it replaces with the originals, and puts
	// that value back once every step has settled (unless someone else has
	// changed it since). A node count of at least 1, or a percentage from 1%
	// to 25% of the nodes calico-node runs on; a count above a quarter of
	// those nodes is refused in the Stalled condition. Unset: calico-node
	// rolls out as the Installation says (the Tigera operator's default is
	// one node at a time).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : (self.matches('^[0-9]+%$') && int(self.replace('%', '')) >= 1 && int(self.replace('%', '')) <= 25)",message="must be a node count of at least 1, or a percentage from 1% to 25%: more would take the pod network from over a quarter of the nodes at once"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// WindowsReadinessSpec is what the platform team asks for.
// +kubebuilder:validation:XValidation:rule="!has(self.phaseTimeout) || !has(self.progressDeadline) || duration(self.phaseTimeout) == duration(self.progressDeadline)",message="phaseTimeout is the deprecated name of progressDeadline: set only progressDeadline, or both to the same value"
type WindowsReadinessSpec struct {
	// Direction is Migrate (the default) or Rollback.
	// +kubebuilder:default=Migrate
	// +optional
	Direction Direction `json:"direction,omitempty"`

	// Paused stops the operator before its next change to the cluster. Waits
	// already under way are still observed and reported.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// ServiceCIDRs overrides the detected service network written into the
	// Installation's spec.serviceCIDRs.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.all(b, a == b || !isCIDR(a) || !isCIDR(b) || !cidr(a).containsCIDR(cidr(b))))",message="must not overlap one another"
	// +listType=set
	// +optional
	ServiceCIDRs []IPv4CIDR `json:"serviceCIDRs,omitempty"`

	// APIServer overrides the detected API server address written into the
	// ConfigMap tigera-operator/kubernetes-services-endpoint.
	// +optional
	APIServer *APIServerEndpoint `json:"apiServer,omitempty"`

	// Preflight tunes the checks run before the first change.
	// +optional
	Preflight PreflightSpec `json:"preflight,omitempty"`

	// WindowsNodes describes the Windows nodes to come, for the preflight's
	// capacity check.
	// +optional
	WindowsNodes *WindowsNodesSpec `json:"windowsNodes,omitempty"`

	// ProgressDeadline is how long a step may go without progress (no
	// calico-node updated, no change in what Calico reports) before the
	// migration is marked Stalled, like a Deployment's
	// progressDeadlineSeconds. A rollout that keeps moving never stalls,
	// however long it takes. Unset: phaseTimeout, else 30m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="must be between 1m and 24h"
	// +optional
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// PhaseTimeout is the deprecated name of progressDeadline, kept so that
	// existing objects and manifests still apply. It bounded a step's total
	// time; it now means the same as progressDeadline (time without
	// progress). Set one of the two, or both to the same value.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="must be between 1m and 24h"
	// +optional
	PhaseTimeout *metav1.Duration `json:"phaseTimeout,omitempty"`

	// Rollout tunes the calico-node rollouts the migration causes.
	// +optional
	Rollout RolloutSpec `json:"rollout,omitempty"`

	// WindowsNodeGate rejects new Nodes labelled kubernetes.io/os=windows
	// while the cluster is not Windows-ready.
	// +kubebuilder:default=Enabled
	// +optional
	WindowsNodeGate GateMode `json:"windowsNodeGate,omitempty"`

	// DryRun computes the full plan, every change in order with the values
	// before and after, into status.plan, and changes nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// RequireApproval stops before each disruptive step (Encapsulation, BGP,
	// ServicesEndpoint) until it is listed in approvedSteps, so that it can
	// run inside a maintenance window.
	// +optional
	RequireApproval bool `json:"requireApproval,omitempty"`

	// ApprovedSteps are the disruptive steps a person has approved.
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:Enum=Encapsulation;BGP;ServicesEndpoint
	// +kubebuilder:validation:XValidation:rule="self.all(s, s in ['Encapsulation', 'BGP', 'ServicesEndpoint'])",message="only the disruptive steps Encapsulation, BGP and ServicesEndpoint wait for approval"
	// +listType=set
	// +optional
	ApprovedSteps []StepName `json:"approvedSteps,omitempty"`

	// PodNetworkCheck tunes the pod network check run before the first change
	// (the baseline) and after each disruptive step.
	// +optional
	PodNetworkCheck PodNetworkCheckSpec `json:"podNetworkCheck,omitempty"`
}

// PodCheckFailureAction is what a pod network worse than the baseline does
// to the migration.
// +kubebuilder:validation:Enum=Stop;Revert
type PodCheckFailureAction string

const (
	// PodCheckStop stalls the migration with the diagnosis.
	PodCheckStop PodCheckFailureAction = "Stop"
	// PodCheckRevert reverts the step after which the check failed, then stalls.
	PodCheckRevert PodCheckFailureAction = "Revert"
)

// PodNetworkCheckSpec tunes the pod network check: short-lived pods on the
// pod network of every Linux node test their peers on other nodes over TCP
// (small and full-size), ICMP, DNS and a Service ClusterIP.
type PodNetworkCheckSpec struct {
	// Disabled turns the check off; the preflight records it as a warning.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// OnFailure is Stop (the default: Stalled, with the diagnosis) or Revert
	// (revert the step after which the pod network got worse, then stall).
	// +kubebuilder:default=Stop
	// +optional
	OnFailure PodCheckFailureAction `json:"onFailure,omitempty"`

	// Timeout bounds one round: the pods start, serve, test and report.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s') && duration(self) <= duration('30m')",message="must be between 30s and 30m"
	// +kubebuilder:default="3m"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

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
// approvedSteps' items above.
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

// OriginalValue is a scalar field as it was before the migration.
type OriginalValue struct {
	// Present is false when the field was absent.
	Present bool `json:"present"`
	// +optional
	Value string `json:"value,omitempty"`
}

// OriginalList is a list field as it was before the migration.
type OriginalList struct {
	// Present is false when the field was absent.
	Present bool `json:"present"`
	// +optional
	Values []string `json:"values,omitempty"`
}

// OriginalIPAMConfig is IPAMConfiguration "default" as it was.
type OriginalIPAMConfig struct {
	// Present is false when the object did not exist; a rollback deletes it.
	Present bool `json:"present"`
	// +optional
	StrictAffinity bool `json:"strictAffinity,omitempty"`
}

// OriginalPool is one Installation IP pool's encapsulation as it was.
type OriginalPool struct {
	Name string `json:"name"`
	CIDR string `json:"cidr"`
	// +optional
	Encapsulation string `json:"encapsulation,omitempty"`
}

// OriginalConfigMap is the services-endpoint ConfigMap as it was.
type OriginalConfigMap struct {
	// Present is false when the ConfigMap did not exist; a rollback deletes it.
	Present bool `json:"present"`
	// +optional
	Data map[string]string `json:"data,omitempty"`
	// NodeEnv is the API server address calico-node ran with before the
	// migration. The Tigera operator keeps the ConfigMap's last values in
	// memory after the ConfigMap is deleted, so a rollback writes these values
	// into the ConfigMap, waits for calico-node to run with them, and only
	// then deletes it. Absent in records made before it existed.
	// +optional
	NodeEnv *ServiceEndpointEnv `json:"nodeEnv,omitempty"`
}

// ServiceEndpointEnv is calico-node's KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT; empty when not set.
type ServiceEndpointEnv struct {
	// +optional
	Host string `json:"host,omitempty"`
	// +optional
	Port string `json:"port,omitempty"`
}

// Originals holds the value of everything the migration changes, recorded
// before its first change so that a rollback can restore it exactly.
type Originals struct {
	RecordedAt metav1.Time        `json:"recordedAt"`
	IPAMConfig OriginalIPAMConfig `json:"ipamConfig"`
	// +listType=map
	// +listMapKey=name
	// +optional
	Pools            []OriginalPool    `json:"pools,omitempty"`
	BGP              OriginalValue     `json:"bgp"`
	ServicesEndpoint OriginalConfigMap `json:"servicesEndpoint"`
	ServiceCIDRs     OriginalList      `json:"serviceCIDRs"`
	WindowsDataplane OriginalValue     `json:"windowsDataplane"`
	// WindowsNodesPresent records whether spec.windowsNodes was set; the Tigera
	// operator defaults it once Windows is on and rejects it once Windows is off.
	WindowsNodesPresent bool `json:"windowsNodesPresent"`
	// NodeMaxUnavailable is calico-node's rolling-update maxUnavailable in the
	// Installation's spec.nodeUpdateStrategy (a count or a percentage), put
	// back after spec.rollout.maxUnavailable sped the rollouts up. Records
	// made before winready knew this field lack it; nothing is sped up then.
	// +optional
	NodeMaxUnavailable *OriginalValue `json:"nodeMaxUnavailable,omitempty"`
	// NodeIgnored is calico-node's unsupported.operator.tigera.io/ignore
	// annotation, which winready sets while the Tigera operator reads a
	// write spanning the Installation and the services-endpoint ConfigMap
	// and removes afterwards. An annotation recorded here is someone else's
	// and is never removed. Records made before winready held calico-node
	// lack it.
	// +optional
	NodeIgnored *OriginalValue `json:"nodeIgnored,omitempty"`
	// Overlay is what Installation "overlay", which the Tigera operator
	// merges over "default", held of the fields the migration changes: a
	// rollback restores default and leaves the overlay alone, so the
	// effective Installation is the original only while the overlay still
	// holds these. Records made before winready read the overlay lack it;
	// they count as recorded without one.
	// +optional
	Overlay *OriginalOverlay `json:"overlay,omitempty"`
}

// OriginalOverlay is what Installation "overlay" held, before the
// migration, of the Installation fields the migration changes; a value set
// there wins over default's.
type OriginalOverlay struct {
	// Present is false when there was no Installation overlay.
	Present bool `json:"present"`
	// BGP is spec.calicoNetwork.bgp.
	// +optional
	BGP OriginalValue `json:"bgp,omitempty"`
	// PoolsPresent says whether spec.calicoNetwork.ipPools was set: the
	// overlay's list then replaces default's whole.
	// +optional
	PoolsPresent bool `json:"poolsPresent,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +optional
	Pools []OriginalPool `json:"pools,omitempty"`
	// ServiceCIDRs is spec.serviceCIDRs.
	// +optional
	ServiceCIDRs OriginalList `json:"serviceCIDRs,omitempty"`
	// WindowsDataplane is spec.calicoNetwork.windowsDataplane.
	// +optional
	WindowsDataplane OriginalValue `json:"windowsDataplane,omitempty"`
	// WindowsNodesPresent says whether spec.windowsNodes was set.
	// +optional
	WindowsNodesPresent bool `json:"windowsNodesPresent,omitempty"`
}

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
	// Trigger is Baseline (before the first change) or the step after which
	// the round ran.
	// +kubebuilder:validation:Enum=Baseline;Encapsulation;BGP;ServicesEndpoint
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

// Targets are the values the migration writes, from the spec's overrides,
// else what the cluster already holds, else what was detected.
type Targets struct {
	// Generation is the spec generation these targets were last resolved
	// at. Kept for readers of older statuses: the targets are keyed on
	// InputDigest and ClusterDigest, so a spec edit of other fields (paused,
	// approvedSteps, acknowledge...) leaves them, and this, as they were.
	Generation int64 `json:"generation"`
	// InputDigest is a digest of the spec fields the targets were resolved
	// from (serviceCIDRs, apiServer): a change resolves them again. Empty in
	// targets resolved by a winready that keyed them on Generation.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	InputDigest string `json:"inputDigest,omitempty"`
	// ClusterDigest is a digest of the values the cluster held that the
	// targets were taken from where the spec sets none (the Installation's
	// spec.serviceCIDRs, the services-endpoint ConfigMap's address). Before
	// the first change a new value there resolves the targets again; after
	// it those objects hold what the migration wrote, and only the spec
	// moves the targets.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ClusterDigest string `json:"clusterDigest,omitempty"`
	// APIServerHost and APIServerPort go into kubernetes-services-endpoint.
	APIServerHost string `json:"apiServerHost"`
	APIServerPort string `json:"apiServerPort"`
	// ServiceCIDRs go into the Installation's spec.serviceCIDRs.
	// +listType=atomic
	ServiceCIDRs []string `json:"serviceCIDRs"`
	// Source says where each value came from.
	// +optional
	Source string `json:"source,omitempty"`
}

// WindowsReadinessStatus is what the operator observed and did.
type WindowsReadinessStatus struct {
	// ObservedGeneration is the spec generation last fully acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Message says what the operator is doing or waiting for.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Steps records each step of the migration, in order.
	// +listType=map
	// +listMapKey=name
	// +optional
	Steps []StepStatus `json:"steps,omitempty"`

	// CurrentStep is the step in progress (InProgress or Reverting), for
	// kubectl get's Step column; empty when none is.
	// +optional
	CurrentStep StepName `json:"currentStep,omitempty"`

	// Originals are the values the migration changes, as they were before.
	// +optional
	Originals *Originals `json:"originals,omitempty"`

	// Targets are the values the migration writes.
	// +optional
	Targets *Targets `json:"targets,omitempty"`

	// Plan lists, for spec.dryRun, every change the migration would make.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Plan []PlannedChange `json:"plan,omitempty"`

	// Preflight is the last preflight's outcome.
	// +optional
	Preflight *PreflightStatus `json:"preflight,omitempty"`

	// PodNetworkCheck is the pod network check's baseline and last round.
	// +optional
	PodNetworkCheck *PodNetworkCheckStatus `json:"podNetworkCheck,omitempty"`

	// WindowsNodes lists Nodes labelled kubernetes.io/os=windows (the first 50).
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	WindowsNodes []string `json:"windowsNodes,omitempty"`

	// Rollout is the calico-node rollout under way or last seen: its
	// progress, its pace and an estimate of the time left.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// WindowsNodeJoins says, once the cluster is Ready, how far each Windows
	// node has come in joining and what it waits for: the first 50, those
	// overdue first, then those joining, then those joined, each by name.
	// +kubebuilder:validation:MaxItems=50
	// +listType=map
	// +listMapKey=name
	// +optional
	WindowsNodeJoins []WindowsNodeJoin `json:"windowsNodeJoins,omitempty"`
}

// JoinState is how far a Windows node has come in joining the cluster.
// +kubebuilder:validation:Enum=Joining;Joined;Overdue
type JoinState string

// The join states.
const (
	// JoinJoining: the node waits for something, within its join timeout.
	JoinJoining JoinState = "Joining"
	// JoinJoined: calico-node-windows and the node are Ready, with an IPAM
	// block affine to the node.
	JoinJoined JoinState = "Joined"
	// JoinOverdue: the node still waits past spec.windowsNodes.joinTimeout.
	JoinOverdue JoinState = "Overdue"
)

// WindowsNodeJoin is what a Windows node has done to join, and what it
// waits for.
type WindowsNodeJoin struct {
	// Name is the Node's name.
	// +kubebuilder:validation:MaxLength=253
	Name  string    `json:"name"`
	State JoinState `json:"state"`
	// Pod is the node's calico-node-windows pod; empty while there is none.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Pod string `json:"pod,omitempty"`
	// PodPhase is the pod's phase (Pending, Running...).
	// +kubebuilder:validation:MaxLength=32
	// +optional
	PodPhase string `json:"podPhase,omitempty"`
	// PodReady is true when the pod's Ready condition is True.
	// +optional
	PodReady bool `json:"podReady,omitempty"`
	// Block is the CIDR of an IPAM block affine to the node (host:<name>);
	// empty while there is none.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Block string `json:"block,omitempty"`
	// NodeReady is true when the Node's Ready condition is True.
	// +optional
	NodeReady bool `json:"nodeReady,omitempty"`
	// WaitingFor says what is missing, with the pod's reason (image pull,
	// crash loop with its last message, pending); empty once joined.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	WaitingFor string `json:"waitingFor,omitempty"`
	// Since is when the node entered its state, or when the watch began for
	// it (the later of its creation and the cluster becoming Ready). A
	// joining node is overdue at Since plus spec.windowsNodes.joinTimeout.
	Since metav1.Time `json:"since"`
}

// WindowsReadiness migrates a Calico cluster into the mode Windows nodes need,
// and back.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=wr
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="metadata.name must be 'default': a cluster has one WindowsReadiness"
// +kubebuilder:printcolumn:name="Direction",type=string,JSONPath=`.spec.direction`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.rollout.progress`
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.rollout.estimatedTimeLeft`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WindowsReadiness struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec WindowsReadinessSpec `json:"spec,omitempty"`
	// +optional
	Status WindowsReadinessStatus `json:"status,omitempty"`
}

// WindowsReadinessList is a list of WindowsReadiness.
// +kubebuilder:object:root=true
type WindowsReadinessList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WindowsReadiness `json:"items"`
}

// RolloutStatus is a DaemonSet rollout's progress as winready observed it.
type RolloutStatus struct {
	// DaemonSet is namespace/name of the DaemonSet rolling out.
	DaemonSet string `json:"daemonSet"`

	// Generation is the DaemonSet's metadata.generation this rollout is for.
	Generation int64 `json:"generation"`

	// ObservedGeneration is the generation the DaemonSet controller had
	// seen (status.observedGeneration).
	ObservedGeneration int64 `json:"observedGeneration"`

	// Updated is how many nodes run the new pod template
	// (updatedNumberScheduled).
	Updated int32 `json:"updated"`

	// Progress is "updated/total", for kubectl get's Progress column.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Progress string `json:"progress,omitempty"`

	// Unavailable is how many nodes lack an available pod
	// (numberUnavailable).
	Unavailable int32 `json:"unavailable"`

	// Available is how many nodes have an available pod (numberAvailable).
	Available int32 `json:"available"`

	// Total is how many nodes should run the pod (desiredNumberScheduled).
	Total int32 `json:"total"`

	// PacePerNode is the smoothed time one node has taken to update.
	// +optional
	PacePerNode *metav1.Duration `json:"pacePerNode,omitempty"`

	// EstimatedTimeLeft is the time the nodes still to update will take at
	// that pace.
	// +optional
	EstimatedTimeLeft *metav1.Duration `json:"estimatedTimeLeft,omitempty"`

	// LastProgressAt is when a node was last updated or the rollout
	// otherwise moved; the progress deadline counts from here.
	// +optional
	LastProgressAt *metav1.MicroTime `json:"lastProgressAt,omitempty"`

	// UpdatedChangedAt is when Updated last changed; the pace is measured
	// from here.
	// +optional
	UpdatedChangedAt *metav1.MicroTime `json:"updatedChangedAt,omitempty"`
}
