package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
