package windows

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
)

// The join watch's condition and its reasons.
const (
	// ConditionHealthy is the condition that sums up the Windows nodes' joins.
	ConditionHealthy = "WindowsNodesHealthy"

	// Reasons of ConditionHealthy; ReasonNotJoined is also the Event's.
	ReasonNoWindowsNodes = "NoWindowsNodes"
	ReasonJoined         = "WindowsNodesJoined"
	ReasonJoining        = "WindowsNodesJoining"
	ReasonNotJoined      = "WindowsNodeNotJoined"

	// maxNamed bounds the nodes a condition message names with what they
	// wait for.
	maxNamed = 3
)

// Summarize turns every node's entry (all of them, before Bound) into the
// WindowsNodesHealthy condition: True when every node has joined (or there
// is none), Unknown while some are joining within the timeout, False when
// one is overdue.
func Summarize(joins []v1alpha1.WindowsNodeJoin, timeout time.Duration) (metav1.ConditionStatus, string, string) {
	if len(joins) == 0 {
		return metav1.ConditionTrue, ReasonNoWindowsNodes,
			"no Windows node yet: each one that joins is followed in status.windowsNodeJoins"
	}
	var overdue, joining []v1alpha1.WindowsNodeJoin
	for _, j := range joins {
		switch j.State {
		case v1alpha1.JoinOverdue:
			overdue = append(overdue, j)
		case v1alpha1.JoinJoining:
			joining = append(joining, j)
		}
	}
	joined := len(joins) - len(overdue) - len(joining)
	head := fmt.Sprintf("%d of %d Windows nodes joined", joined, len(joins))
	switch {
	case len(overdue) > 0:
		return metav1.ConditionFalse, ReasonNotJoined,
			fmt.Sprintf("%s; not joined within %s: %s", head, timeout, named(overdue))
	case len(joining) > 0:
		return metav1.ConditionUnknown, ReasonJoining, fmt.Sprintf("%s; joining: %s", head, named(joining))
	}
	return metav1.ConditionTrue, ReasonJoined,
		head + ": calico-node-windows Ready, an IPAM block affine to each, every node Ready"
}

// named lists the first nodes with what they wait for, and counts the rest.
func named(joins []v1alpha1.WindowsNodeJoin) string {
	sorted := Bound(joins)
	parts := make([]string, 0, maxNamed+1)
	for i, j := range sorted {
		if i == maxNamed {
			parts = append(parts, fmt.Sprintf("and %d more (status.windowsNodeJoins)", len(joins)-maxNamed))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (waiting for %s)", j.Name, j.WaitingFor))
	}
	return strings.Join(parts, "; ")
}

// PodsByNode maps each node's name to its calico-node-windows pod: the one
// placed on it (spec.nodeName), or, while pending, the one its DaemonSet
// meant for it (a required node affinity on metadata.name). Where there are
// two (a rollout), a pod not being deleted wins, then the newest.
func PodsByNode(pods []corev1.Pod) map[string]*corev1.Pod {
	out := make(map[string]*corev1.Pod, len(pods))
	for i := range pods {
		pod := &pods[i]
		node := pod.Spec.NodeName
		if node == "" {
			node = affinityNode(pod)
		}
		if node == "" {
			continue
		}
		if cur, ok := out[node]; !ok || better(pod, cur) {
			out[node] = pod
		}
	}
	return out
}

func better(a, b *corev1.Pod) bool {
	if (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) {
		return a.DeletionTimestamp == nil
	}
	return b.CreationTimestamp.Before(&a.CreationTimestamp)
}

// affinityNode is the node a DaemonSet's pod is bound to by its required
// node affinity (matchFields metadata.name In [node]).
func affinityNode(pod *corev1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// AffineHost is the node an IPAM block's affinity names ("host:<node>"),
// empty for any other affinity.
func AffineHost(affinity *string) string {
	if affinity == nil {
		return ""
	}
	host, _ := strings.CutPrefix(*affinity, "host:")
	if host == *affinity {
		return ""
	}
	return host
}
