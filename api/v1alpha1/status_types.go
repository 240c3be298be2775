package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	// Canary is the canary of the last rollout a change started
	// (spec.rollout.canary).
	// +optional
	Canary *CanaryStatus `json:"canary,omitempty"`

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
