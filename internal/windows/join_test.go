package windows

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
)

func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func readyPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

// waitingPod is a pod on node whose container "node" waits with reason.
func waitingPod(node string, phase corev1.PodPhase, st corev1.ContainerStatus) *corev1.Pod {
	pod := readyPod("calico-node-windows-x", node)
	pod.Status.Phase = phase
	pod.Status.Conditions[1] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	return pod
}

func TestPodWaiting(t *testing.T) {
	pending := readyPod("p", "")
	pending.Status.Phase = corev1.PodPending
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/4 nodes are available: 1 Insufficient cpu."}}
	notReady := readyPod("p", "win-1")
	notReady.Status.Conditions[1] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
		Reason: "ContainersNotReady", Message: "containers with unready status: [node]"}
	creating := waitingPod("win-1", corev1.PodPending, corev1.ContainerStatus{Name: "node",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	initFailed := readyPod("p", "win-1")
	initFailed.Status.Phase = corev1.PodPending
	initFailed.Status.Conditions[1].Status = corev1.ConditionFalse
	initFailed.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install-cni",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "no HNS network"}}}}
	long := strings.Repeat("x", 1000)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"a Ready pod waits for nothing", readyPod("p", "win-1"), ""},
		{"an unscheduled pod says why", pending, "pending, not scheduled: Unschedulable: 0/4 nodes are available: 1 Insufficient cpu."},
		{"an image that cannot be pulled", waitingPod("win-1", corev1.PodPending, corev1.ContainerStatus{Name: "node",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
				Message: `Back-off pulling image "quay.io/calico/node-windows:v3.32.0"`}}}),
			`image pull: container node ImagePullBackOff: Back-off pulling image "quay.io/calico/node-windows:v3.32.0"`},
		{"a crash loop with its last message", waitingPod("win-1", corev1.PodRunning, corev1.ContainerStatus{Name: "felix", RestartCount: 5,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				Message: "Failed to create HNS network:\n  vSwitch not found"}}}),
			"crash loop: container felix restarted 5 times, last exit code 1 Error: Failed to create HNS network: vSwitch not found"},
		{"a crash loop's long message is cut", waitingPod("win-1", corev1.PodRunning, corev1.ContainerStatus{Name: "felix", RestartCount: 1,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: long}}}),
			"crash loop: container felix restarted 1 times, last exit code 1 " + long[:maxDetail] + "..."},
		{"a failed init container", initFailed, "container install-cni exited with code 2 Error: no HNS network"},
		{"containers being created", creating, "pending: containers not started yet"},
		{"running but not Ready", notReady, "Running, not Ready: ContainersNotReady: containers with unready status: [node]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodWaiting(tc.pod); got != tc.want {
				t.Errorf("PodWaiting() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	notReady := readyNode("win-1")
	notReady.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
		Reason: "KubeletNotReady", Message: "container runtime network not ready"}
	for _, tc := range []struct {
		name string
		in   Node
		want v1alpha1.WindowsNodeJoin
	}{
		{"everything in place", Node{Node: readyNode("win-1"), Pod: readyPod("cnw-1", "win-1"), Block: "172.20.1.0/26"},
			v1alpha1.WindowsNodeJoin{Name: "win-1", Pod: "cnw-1", PodPhase: "Running", PodReady: true, Block: "172.20.1.0/26", NodeReady: true}},
		{"no pod, no block", Node{Node: readyNode("win-1")}, v1alpha1.WindowsNodeJoin{Name: "win-1", NodeReady: true,
			WaitingFor: "calico-node-windows: no pod on the node yet (the DaemonSet has not placed one); " +
				"IPAM block: none affine to host:win-1 (calico-node-windows claims one when it starts)"}},
		{"node not Ready and blocks unreadable", Node{Node: notReady, Pod: readyPod("cnw-1", "win-1"), BlocksUnreadable: true},
			v1alpha1.WindowsNodeJoin{Name: "win-1", Pod: "cnw-1", PodPhase: "Running", PodReady: true,
				WaitingFor: "node not Ready: KubeletNotReady: container runtime network not ready; " +
					"IPAM block: cannot be read (neither projectcalico.org/v3 nor crd.projectcalico.org/v1 serves ipamblocks)"}},
		{"a node that never reported", Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-2"}},
			Pod: readyPod("cnw-2", "win-2"), Block: "172.20.2.0/26"}, v1alpha1.WindowsNodeJoin{Name: "win-2", Pod: "cnw-2",
			PodPhase: "Running", PodReady: true, Block: "172.20.2.0/26", WaitingFor: "node not Ready: the kubelet has not reported yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate(tc.in)
			if got != tc.want {
				t.Errorf("Evaluate() =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestAdvance(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	timeout := 10 * time.Minute
	waiting := v1alpha1.WindowsNodeJoin{Name: "win-1", WaitingFor: "IPAM block"}
	joined := v1alpha1.WindowsNodeJoin{Name: "win-1"}
	entry := func(state v1alpha1.JoinState, since time.Time) *v1alpha1.WindowsNodeJoin {
		return &v1alpha1.WindowsNodeJoin{Name: "win-1", State: state, Since: metav1.NewTime(since)}
	}
	for _, tc := range []struct {
		name         string
		prev         *v1alpha1.WindowsNodeJoin
		cur          v1alpha1.WindowsNodeJoin
		now          time.Time
		wantState    v1alpha1.JoinState
		wantSince    time.Time
		wantDeadline time.Time
	}{
		{"a new node joining counts from the start", nil, waiting, t0.Add(time.Minute), v1alpha1.JoinJoining, t0, t0.Add(timeout)},
		{"a new node already joined", nil, joined, t0.Add(time.Minute), v1alpha1.JoinJoined, t0, time.Time{}},
		{"a joining node keeps its start", entry(v1alpha1.JoinJoining, t0), waiting, t0.Add(9 * time.Minute),
			v1alpha1.JoinJoining, t0, t0.Add(timeout)},
		{"at the deadline it is overdue", entry(v1alpha1.JoinJoining, t0), waiting, t0.Add(timeout), v1alpha1.JoinOverdue, t0, time.Time{}},
		{"an overdue node that joins is joined from now", entry(v1alpha1.JoinOverdue, t0), joined, t0.Add(time.Hour),
			v1alpha1.JoinJoined, t0.Add(time.Hour), time.Time{}},
		{"a joined node that fails again waits from now", entry(v1alpha1.JoinJoined, t0), waiting, t0.Add(time.Hour),
			v1alpha1.JoinJoining, t0.Add(time.Hour), t0.Add(time.Hour + timeout)},
		{"a joined node stays joined since then", entry(v1alpha1.JoinJoined, t0), joined, t0.Add(time.Hour),
			v1alpha1.JoinJoined, t0, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, deadline := Advance(tc.prev, tc.cur, t0, tc.now, timeout)
			if got.State != tc.wantState || !got.Since.Time.Equal(tc.wantSince) || !deadline.Equal(tc.wantDeadline) {
				t.Errorf("Advance() = %s since %s deadline %s, want %s since %s deadline %s",
					got.State, got.Since.Time, deadline, tc.wantState, tc.wantSince, tc.wantDeadline)
			}
		})
	}
}

func TestWatchStart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}
	if got := WatchStart(node, t0.Add(time.Hour)); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("a node older than Ready starts at Ready, got %s", got)
	}
	if got := WatchStart(node, t0.Add(-time.Hour)); !got.Equal(t0) {
		t.Errorf("a node newer than Ready starts at its creation, got %s", got)
	}
}

func TestSummarize(t *testing.T) {
	j := func(name string, state v1alpha1.JoinState, waiting string) v1alpha1.WindowsNodeJoin {
		return v1alpha1.WindowsNodeJoin{Name: name, State: state, WaitingFor: waiting}
	}
	var many []v1alpha1.WindowsNodeJoin
	for i := range 5 {
		many = append(many, j(fmt.Sprintf("win-%d", i), v1alpha1.JoinJoining, "node not Ready"))
	}
	for _, tc := range []struct {
		name       string
		joins      []v1alpha1.WindowsNodeJoin
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"no Windows node", nil, metav1.ConditionTrue, ReasonNoWindowsNodes,
			"no Windows node yet: each one that joins is followed in status.windowsNodeJoins"},
		{"all joined", []v1alpha1.WindowsNodeJoin{j("win-1", v1alpha1.JoinJoined, ""), j("win-2", v1alpha1.JoinJoined, "")},
			metav1.ConditionTrue, ReasonJoined, "2 of 2 Windows nodes joined: calico-node-windows Ready, an IPAM block affine to each, every node Ready"},
		{"one joining", []v1alpha1.WindowsNodeJoin{j("win-1", v1alpha1.JoinJoined, ""), j("win-2", v1alpha1.JoinJoining, "IPAM block: none")},
			metav1.ConditionUnknown, ReasonJoining, "1 of 2 Windows nodes joined; joining: win-2 (waiting for IPAM block: none)"},
		{"an overdue node wins over a joining one", []v1alpha1.WindowsNodeJoin{j("win-1", v1alpha1.JoinJoining, "x"),
			j("win-2", v1alpha1.JoinOverdue, "calico-node-windows pod p: image pull")}, metav1.ConditionFalse, ReasonNotJoined,
			"0 of 2 Windows nodes joined; not joined within 10m0s: win-2 (waiting for calico-node-windows pod p: image pull)"},
		{"many are counted, not all named", many, metav1.ConditionUnknown, ReasonJoining,
			"0 of 5 Windows nodes joined; joining: win-0 (waiting for node not Ready); win-1 (waiting for node not Ready); " +
				"win-2 (waiting for node not Ready); and 2 more (status.windowsNodeJoins)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason, msg := Summarize(tc.joins, 10*time.Minute)
			if status != tc.wantStatus || reason != tc.wantReason || msg != tc.wantMsg {
				t.Errorf("Summarize() = %s %s %q, want %s %s %q", status, reason, msg, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

func TestBound(t *testing.T) {
	var joins []v1alpha1.WindowsNodeJoin
	for i := range MaxListed + 5 {
		joins = append(joins, v1alpha1.WindowsNodeJoin{Name: fmt.Sprintf("win-%03d", i), State: v1alpha1.JoinJoined})
	}
	joins = append(joins, v1alpha1.WindowsNodeJoin{Name: "win-zzz", State: v1alpha1.JoinOverdue},
		v1alpha1.WindowsNodeJoin{Name: "win-yyy", State: v1alpha1.JoinJoining})
	got := Bound(joins)
	if len(got) != MaxListed {
		t.Fatalf("Bound kept %d entries, want %d", len(got), MaxListed)
	}
	if got[0].Name != "win-zzz" || got[1].Name != "win-yyy" || got[2].Name != "win-000" {
		t.Errorf("Bound order starts %s, %s, %s; want overdue, joining, then joined by name", got[0].Name, got[1].Name, got[2].Name)
	}
}

func TestPodsByNode(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	old := readyPod("old", "win-1")
	old.CreationTimestamp = t0
	newer := readyPod("newer", "win-1")
	newer.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	deleting := readyPod("deleting", "win-1")
	deleting.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	deleting.DeletionTimestamp = &t0
	pending := readyPod("pending", "")
	pending.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"win-2"}}}}}}}}
	stray := readyPod("stray", "")
	got := PodsByNode([]corev1.Pod{*old, *deleting, *newer, *pending, *stray})
	if len(got) != 2 || got["win-1"].Name != "newer" || got["win-2"].Name != "pending" {
		names := map[string]string{}
		for n, p := range got {
			names[n] = p.Name
		}
		t.Errorf("PodsByNode() = %v, want win-1: newer, win-2: pending", names)
	}
}

func TestAffineHost(t *testing.T) {
	for in, want := range map[string]string{"host:win-1": "win-1", "virtual:foo": "", "win-1": ""} {
		if got := AffineHost(ptr.To(in)); got != want {
			t.Errorf("AffineHost(%q) = %q, want %q", in, got, want)
		}
	}
	if got := AffineHost(nil); got != "" {
		t.Errorf("AffineHost(nil) = %q", got)
	}
}
