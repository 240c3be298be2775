package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

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

	// Canary is how many nodes the rollout a change starts takes one at a
	// time before the pod network check proves them: as soon as that many
	// nodes run the new calico-node, the check runs between them and the
	// nodes still on the old one, both ways, while the rollout goes on one
	// node at a time. When the check passes, the rollout goes on at
	// maxUnavailable; when it fails, winready reverts the changes that
	// started the rollout (calico-node rolls back on the canary's nodes) and
	// stops, naming the failing pairs. A node count, or a percentage of the
	// Linux nodes calico-node runs on (rounded up); always fewer than all of
	// them. 0 turns the canary off; unset is 3 nodes on a cluster of more
	// than 6 Linux nodes, and none on a smaller one. The canary needs the
	// pod network check (spec.podNetworkCheck), and, when
	// spec.rollout.maxUnavailable is unset, an Installation that already
	// rolls one node at a time.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : (self.matches('^[0-9]+%$') && int(self.replace('%', '')) <= 50)",message="must be a node count of 0 or more, or a percentage from 0% to 50%"
	// +optional
	Canary *intstr.IntOrString `json:"canary,omitempty"`
}

// DefaultCanaryNodes is the canary's size when spec.rollout.canary is unset,
// on a cluster of more than twice as many Linux nodes.
const DefaultCanaryNodes = 3

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
