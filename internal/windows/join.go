// Package windows follows each Windows node as it joins a Windows-ready
// cluster: its calico-node-windows pod Ready, an IPAM block affine to it, the
// node Ready. It is pure: the controller reads the objects, this package says
// what is done, what is waited for, and when a node is overdue.
package windows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
)

// What the join watch looks at, and its bounds.
const (
	// PodLabel and PodLabelValue select the calico-node-windows pods the
	// Tigera operator's DaemonSet runs in calico-system.
	PodLabel      = "k8s-app"
	PodLabelValue = "calico-node-windows"

	// DefaultJoinTimeout matches the CRD default of
	// spec.windowsNodes.joinTimeout.
	DefaultJoinTimeout = 10 * time.Minute

	// MaxListed bounds status.windowsNodeJoins.
	MaxListed = 50

	// maxDetail bounds a message copied from a pod or a node (a crash loop's
	// last message can be a page of log).
	maxDetail = 300
)

// Node is what was observed of one Windows node.
type Node struct {
	Node *corev1.Node
	// Pod is the node's calico-node-windows pod, nil when it has none.
	Pod *corev1.Pod
	// Block is the CIDR of an IPAM block affine to the node, empty when none.
	Block string
	// BlocksUnreadable: neither projectcalico.org/v3 nor
	// crd.projectcalico.org/v1 serves IPAM blocks.
	BlocksUnreadable bool
}

// Evaluate says what the node has done and what it waits for. State and
// Since are left to Advance.
func Evaluate(n Node) v1alpha1.WindowsNodeJoin {
	j := v1alpha1.WindowsNodeJoin{Name: n.Node.Name, Block: n.Block}
	var waiting []string
	var why string
	j.NodeReady, why = NodeReady(n.Node)
	if !j.NodeReady {
		waiting = append(waiting, why)
	}
	if n.Pod == nil {
		waiting = append(waiting, "calico-node-windows: no pod on the node yet (the DaemonSet has not placed one)")
	} else {
		j.Pod, j.PodPhase = n.Pod.Name, string(n.Pod.Status.Phase)
		why = PodWaiting(n.Pod)
		j.PodReady = why == ""
		if !j.PodReady {
			waiting = append(waiting, "calico-node-windows pod "+n.Pod.Name+": "+why)
		}
	}
	switch {
	case n.Block != "":
	case n.BlocksUnreadable:
		waiting = append(waiting, "IPAM block: cannot be read (neither projectcalico.org/v3 nor crd.projectcalico.org/v1 serves ipamblocks)")
	default:
		waiting = append(waiting, "IPAM block: none affine to host:"+n.Node.Name+" (calico-node-windows claims one when it starts)")
	}
	j.WaitingFor = strings.Join(waiting, "; ")
	return j
}

// NodeReady says whether the node's Ready condition is True, and if not, why.
func NodeReady(n *corev1.Node) (bool, string) {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return true, ""
		}
		return false, "node not Ready: " + detail(c.Reason, c.Message)
	}
	return false, "node not Ready: the kubelet has not reported yet"
}

// PodWaiting says why a calico-node-windows pod is not Ready: the image
// pull, a crash loop with its last message, pending; empty when it is Ready.
func PodWaiting(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "being deleted"
	}
	if podCondition(pod, corev1.PodReady) == corev1.ConditionTrue {
		return ""
	}
	if pod.Spec.NodeName == "" {
		if c := findPodCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
			return "pending, not scheduled: " + detail(c.Reason, c.Message)
		}
		return "pending, not scheduled yet"
	}
	statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	for _, s := range statuses {
		if why := containerWaiting(s); why != "" {
			return why
		}
	}
	if pod.Status.Phase == corev1.PodPending {
		return "pending: containers not started yet"
	}
	if c := findPodCondition(pod, corev1.PodReady); c != nil && (c.Reason != "" || c.Message != "") {
		return fmt.Sprintf("%s, not Ready: %s", pod.Status.Phase, detail(c.Reason, c.Message))
	}
	return fmt.Sprintf("%s, not Ready", pod.Status.Phase)
}

// imagePullReasons are the kubelet's reasons for a container whose image
// cannot be pulled.
var imagePullReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}

// containerWaiting explains a container that keeps its pod from being Ready.
func containerWaiting(s corev1.ContainerStatus) string {
	if w := s.State.Waiting; w != nil {
		switch {
		case slices.Contains(imagePullReasons, w.Reason):
			return fmt.Sprintf("image pull: container %s %s", s.Name, detail(w.Reason, w.Message))
		case w.Reason == "CrashLoopBackOff":
			msg := fmt.Sprintf("crash loop: container %s restarted %d times", s.Name, s.RestartCount)
			if t := s.LastTerminationState.Terminated; t != nil {
				msg += fmt.Sprintf(", last exit code %d", t.ExitCode)
				if t.Reason != "" || t.Message != "" {
					msg += " " + detail(t.Reason, t.Message)
				}
			}
			return msg
		case w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing":
			return fmt.Sprintf("container %s waiting: %s", s.Name, detail(w.Reason, w.Message))
		}
	}
	if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
		return fmt.Sprintf("container %s exited with code %d %s", s.Name, t.ExitCode, detail(t.Reason, t.Message))
	}
	return ""
}

func findPodCondition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func podCondition(pod *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	if c := findPodCondition(pod, typ); c != nil {
		return c.Status
	}
	return corev1.ConditionUnknown
}

// detail is "reason: message", each part only when present, the message cut
// to a few lines' worth.
func detail(reason, message string) string {
	message = clip(strings.Join(strings.Fields(message), " "), maxDetail)
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

// clip cuts s to at most n bytes, on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// Advance moves a node's entry on from its previous one: Since is kept while
// the state holds, a joining node becomes overdue at Since plus timeout, and
// a node seen for the first time starts at start (the later of its creation
// and the cluster becoming Ready). It returns the entry and, for a joining
// node, its deadline.
func Advance(prev *v1alpha1.WindowsNodeJoin, cur v1alpha1.WindowsNodeJoin, start, now time.Time, timeout time.Duration) (v1alpha1.WindowsNodeJoin, time.Time) {
	joined := cur.WaitingFor == ""
	since := start
	if prev != nil {
		since = prev.Since.Time
		if (prev.State == v1alpha1.JoinJoined) != joined {
			// Joined after waiting, or waiting again after having joined.
			since = now
		}
	}
	cur.Since = metav1.NewTime(since.Truncate(time.Second))
	if joined {
		cur.State = v1alpha1.JoinJoined
		return cur, time.Time{}
	}
	deadline := cur.Since.Add(timeout)
	if !now.Before(deadline) {
		cur.State = v1alpha1.JoinOverdue
		return cur, time.Time{}
	}
	cur.State = v1alpha1.JoinJoining
	return cur, deadline
}

// WatchStart is when the join watch begins for a node: its creation, or the
// moment the cluster became Ready if that was later (a node that existed
// before could not join).
func WatchStart(n *corev1.Node, readySince time.Time) time.Time {
	if created := n.CreationTimestamp.Time; created.After(readySince) {
		return created
	}
	return readySince
}

// stateOrder lists the entries that need a person first.
var stateOrder = map[v1alpha1.JoinState]int{v1alpha1.JoinOverdue: 0, v1alpha1.JoinJoining: 1, v1alpha1.JoinJoined: 2}

// Bound sorts the entries (overdue, joining, joined; by name within each)
// and keeps the first MaxListed.
func Bound(joins []v1alpha1.WindowsNodeJoin) []v1alpha1.WindowsNodeJoin {
	out := slices.Clone(joins)
	slices.SortFunc(out, func(a, b v1alpha1.WindowsNodeJoin) int {
		return cmp.Or(cmp.Compare(stateOrder[a.State], stateOrder[b.State]), cmp.Compare(a.Name, b.Name))
	})
	if len(out) > MaxListed {
		out = out[:MaxListed]
	}
	return out
}
