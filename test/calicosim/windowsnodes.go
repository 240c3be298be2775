package calicosim

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// WindowsPod is how the calico-node-windows pod on a Windows node behaves.
type WindowsPod string

// How calico-node-windows pods behave.
const (
	// WindowsPodReady (the default): install-cni runs, node and felix start and turn Ready, the node claims an
	// IPAM block for its VXLAN tunnel address and the kubelet reports the node Ready once the CNI is in place.
	WindowsPodReady WindowsPod = "Ready"
	// WindowsPodImagePull: the calico-node-windows image cannot be pulled (ImagePullBackOff); nothing starts.
	WindowsPodImagePull WindowsPod = "ImagePullBackOff"
	// WindowsPodCrashLoop: install-cni has run (the node turns Ready), felix keeps exiting (CrashLoopBackOff)
	// with Message as its last words; no block is claimed.
	WindowsPodCrashLoop WindowsPod = "CrashLoopBackOff"
	// WindowsPodPending: the scheduler cannot place the pod (Unschedulable, Message).
	WindowsPodPending WindowsPod = "Pending"
)

// WindowsNodeBehaviour chooses how a Windows node's join goes.
type WindowsNodeBehaviour struct {
	Pod WindowsPod
	// Message is the crash loop's last message, the image pull's or the scheduler's message; a default otherwise.
	Message string
}

// simulatedBlockLabel marks the IPAM blocks the simulator claims for Windows nodes, so that Clean finds them.
const simulatedBlockLabel = "calicosim.winready.io/windows-node"

// SetWindowsNode chooses how the Windows node name joins from now on (Ready by default).
func (s *Simulator) SetWindowsNode(name string, b WindowsNodeBehaviour) {
	s.mu.Lock()
	if s.windowsNodes == nil {
		s.windowsNodes = map[string]WindowsNodeBehaviour{}
	}
	s.windowsNodes[name] = b
	s.mu.Unlock()
	poke(s.windowsNodePokes)
}

// ResetWindowsNodes makes every Windows node join healthy again.
func (s *Simulator) ResetWindowsNodes() {
	s.mu.Lock()
	s.windowsNodes = nil
	s.mu.Unlock()
	poke(s.windowsNodePokes)
}

func (s *Simulator) windowsNode(name string) WindowsNodeBehaviour {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.windowsNodes[name]
	if b.Pod == "" {
		b.Pod = WindowsPodReady
	}
	return b
}

// windowsNodeAgent plays, for each Windows node, what the DaemonSet controller, the kubelet and
// calico-node-windows do once the operator has rendered calico-node-windows: the pod placed on the node, its
// status, the IPAM block its startup claims (strictAffinity: one block per node, affinity host:<node>), and the
// node's Ready condition. A deleted node's pod goes, as the pod garbage collector does, and its block is released,
// as Calico's kube-controllers do.
type windowsNodeAgent struct {
	sim    *Simulator
	client client.Client
}

func (r *windowsNodeAgent) setup(mgr ctrl.Manager) error {
	r.client = mgr.GetClient()
	allNodes := handler.EnqueueRequestsFromMapFunc(r.allWindowsNodes)
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-windows-nodes").
		WithOptions(controllerOptions()).
		For(&corev1.Node{}, builder.WithPredicates(windowsNodeEvents())).
		Watches(&appsv1.DaemonSet{}, allNodes, builder.WithPredicates(inNamespace(calicoNamespace), named(windowsDaemonSet))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podNode), builder.WithPredicates(inNamespace(calicoNamespace),
			predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[appLabel] == windowsDaemonSet }))).
		WatchesRawSource(source.Channel(r.sim.windowsNodePokes, allNodes)).
		Complete(r)
}

// windowsNodeEvents passes the events of nodes that are, or were, Windows nodes.
func windowsNodeEvents() predicate.Predicate {
	isWindows := func(o client.Object) bool { return o.GetLabels()[osLabel] == "windows" }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isWindows(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return isWindows(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return isWindows(e.ObjectOld) || isWindows(e.ObjectNew) },
		GenericFunc: func(e event.GenericEvent) bool { return isWindows(e.Object) },
	}
}

func (r *windowsNodeAgent) allWindowsNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	nodes := &corev1.NodeList{}
	if err := r.client.List(ctx, nodes, client.MatchingLabels{osLabel: "windows"}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
	}
	return reqs
}

func podNode(_ context.Context, o client.Object) []reconcile.Request {
	node, ok := strings.CutPrefix(o.GetName(), windowsDaemonSet+"-")
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: node}}}
}

func (r *windowsNodeAgent) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	err := r.sim.reader.Get(ctx, req.NamespacedName, node)
	if client.IgnoreNotFound(err) != nil {
		return finish(err)
	}
	if err != nil || node.Labels[osLabel] != "windows" || node.DeletionTimestamp != nil {
		return finish(r.release(ctx, req.Name))
	}
	ds := &appsv1.DaemonSet{}
	if err := r.sim.reader.Get(ctx, types.NamespacedName{Namespace: calicoNamespace, Name: windowsDaemonSet}, ds); err != nil {
		// Not rendered yet (Windows off): no pod, nothing claimed.
		return finish(client.IgnoreNotFound(err))
	}
	b := r.sim.windowsNode(node.Name)
	// In calico-node-windows's order: its startup claims the block, install-cni lets the kubelet report the node
	// Ready, then the pod turns Ready.
	if b.Pod == WindowsPodReady {
		if err := r.claimBlock(ctx, node.Name); err != nil {
			return finish(err)
		}
	}
	if err := r.setNodeReady(ctx, node, b.Pod == WindowsPodReady || b.Pod == WindowsPodCrashLoop); err != nil {
		return finish(err)
	}
	return finish(r.ensurePod(ctx, ds, node.Name, b))
}

// release deletes the pod of a node that is gone and the blocks claimed for it.
func (r *windowsNodeAgent) release(ctx context.Context, node string) error {
	// No kubelet confirms a graceful deletion here: the pod goes at once, as the pod garbage collector forces it.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: calicoNamespace, Name: windowsDaemonSet + "-" + node}}
	if err := r.client.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		return err
	}
	blocks := &calicov3.IPAMBlockList{}
	if err := r.sim.reader.List(ctx, blocks, client.MatchingLabels{simulatedBlockLabel: node}); err != nil {
		return ignoreNoMatch(err)
	}
	for i := range blocks.Items {
		if err := r.sim.delete(ctx, &blocks.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

func ignoreNoMatch(err error) error {
	if meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// setNodeReady writes the node's Ready condition as the kubelet does: NotReady until a CNI configuration exists.
func (r *windowsNodeAgent) setNodeReady(ctx context.Context, node *corev1.Node, ready bool) error {
	want := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status"}
	if !ready {
		want = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}
	}
	conds := make([]corev1.NodeCondition, 0, len(node.Status.Conditions)+1)
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == want.Status && c.Reason == want.Reason {
				return nil
			}
			continue
		}
		conds = append(conds, c)
	}
	conds = append(conds, want)
	node.Status.Conditions = conds
	return r.sim.updateStatus(ctx, node)
}

// claimBlock gives the node an IPAM block of its own in the Installation's first IPv4 pool, as the allocation of
// its VXLAN tunnel address does under strictAffinity; a node that has one keeps it.
func (r *windowsNodeAgent) claimBlock(ctx context.Context, node string) error {
	blocks := &calicov3.IPAMBlockList{}
	if err := r.sim.reader.List(ctx, blocks); err != nil {
		return ignoreNoMatch(err)
	}
	used := map[string]bool{}
	for _, b := range blocks.Items {
		if b.Spec.Affinity != nil && *b.Spec.Affinity == "host:"+node {
			return nil
		}
		used[b.Spec.CIDR] = true
	}
	cidr, err := r.freeBlock(ctx, used)
	if err != nil || cidr == "" {
		return err
	}
	size := 1 << (32 - netip.MustParsePrefix(cidr).Bits())
	unallocated := make([]int, size)
	for i := range unallocated {
		unallocated[i] = i
	}
	affinity := "host:" + node
	block := &calicov3.IPAMBlock{
		ObjectMeta: metav1.ObjectMeta{Name: strings.NewReplacer(".", "-", "/", "-").Replace(cidr),
			Labels: map[string]string{simulatedBlockLabel: node}},
		Spec: calicov3.IPAMBlockSpec{CIDR: cidr, Affinity: &affinity,
			Allocations: make([]*int, size), Unallocated: unallocated, Attributes: []calicov3.AllocationAttribute{}},
	}
	return r.sim.create(ctx, block)
}

// freeBlock is the first block of the Installation's first IPv4 pool that no block uses; empty when it is full.
func (r *windowsNodeAgent) freeBlock(ctx context.Context, used map[string]bool) (string, error) {
	inst, err := r.sim.installation(ctx)
	if err != nil || inst == nil || inst.Spec.CalicoNetwork == nil {
		return "", err
	}
	for _, p := range inst.Spec.CalicoNetwork.IPPools {
		pool, err := netip.ParsePrefix(p.CIDR)
		if err != nil || !pool.Addr().Is4() {
			continue
		}
		bits := 26
		if p.BlockSize != nil {
			bits = int(*p.BlockSize)
		}
		step := uint32(1) << (32 - bits)
		base := pool.Masked().Addr().As4()
		first := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
		for i := uint32(0); i < uint32(1)<<(bits-pool.Bits()); i++ {
			a := first + i*step
			cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}), bits).String()
			if !used[cidr] {
				return cidr, nil
			}
		}
		return "", nil
	}
	return "", nil
}

// ensurePod creates the node's calico-node-windows pod as the DaemonSet controller does (placed on the node,
// or, for WindowsPodPending, left to a scheduler that cannot place it) and writes the status b calls for.
func (r *windowsNodeAgent) ensurePod(ctx context.Context, ds *appsv1.DaemonSet, node string, b WindowsNodeBehaviour) error {
	pod := &corev1.Pod{}
	key := types.NamespacedName{Namespace: calicoNamespace, Name: windowsDaemonSet + "-" + node}
	err := r.sim.reader.Get(ctx, key, pod)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err != nil {
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: ds.Spec.Template.Labels},
			Spec: *ds.Spec.Template.Spec.DeepCopy()}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
		if b.Pod != WindowsPodPending {
			pod.Spec.NodeName = node
		}
		if err := controllerutil.SetControllerReference(ds, pod, r.client.Scheme()); err != nil {
			return err
		}
		if err := r.sim.create(ctx, pod); err != nil {
			return err
		}
	}
	if pod.Spec.NodeName == "" && b.Pod != WindowsPodPending {
		// The scheduler can place it now: it binds the pod to its node.
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}
		if err := r.client.SubResource("binding").Create(ctx, pod, binding); err != nil {
			return err
		}
		r.sim.count(pod, "binding")
		// The binding's own event brings the pod back with its node.
		return nil
	}
	want := windowsPodStatus(pod, b)
	if equality.Semantic.DeepEqual(want, pod.Status) {
		return nil
	}
	pod.Status = want
	return r.sim.updateStatus(ctx, pod)
}

// windowsPodStatus is the status the kubelet (or the scheduler, for a pod it cannot place) reports for b.
func windowsPodStatus(pod *corev1.Pod, b WindowsNodeBehaviour) corev1.PodStatus {
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
		if !ok {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, reason, msg
		}
		return c
	}
	if b.Pod == WindowsPodPending || pod.Spec.NodeName == "" {
		msg := orDefault(b.Message, "0/4 nodes are available: 1 Insufficient memory, 3 node(s) didn't match Pod's node affinity/selector.")
		return corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{cond(corev1.PodScheduled, false, "Unschedulable", msg)}}
	}
	st := corev1.PodStatus{Phase: corev1.PodRunning}
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}})
	}
	for _, c := range pod.Spec.Containers {
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
		switch {
		case b.Pod == WindowsPodImagePull:
			st.Phase = corev1.PodPending
			s.Ready, s.Started = false, ptrTo(false)
			s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff",
				Message: orDefault(b.Message, fmt.Sprintf("Back-off pulling image %q", c.Image))}}
		case b.Pod == WindowsPodCrashLoop && c.Name == "felix":
			s.Ready, s.Started, s.RestartCount = false, ptrTo(false), 5
			s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off 2m40s restarting failed container=%s pod=%s_%s", c.Name, pod.Name, pod.Namespace)}}
			s.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				Message: orDefault(b.Message, "Failed to wait for HNS network: timed out")}}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, s)
	}
	ready := b.Pod == WindowsPodReady
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodScheduled, true, "", ""),
		cond(corev1.PodInitialized, true, "", ""),
		cond(corev1.ContainersReady, ready, "ContainersNotReady", "containers with unready status: "+unready(st)),
		cond(corev1.PodReady, ready, "ContainersNotReady", "containers with unready status: "+unready(st)),
	}
	return st
}

func unready(st corev1.PodStatus) string {
	var names []string
	for _, s := range st.ContainerStatuses {
		if !s.Ready {
			names = append(names, s.Name)
		}
	}
	return "[" + strings.Join(names, " ") + "]"
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// deleteWindowsNodeObjects deletes the calico-node-windows pods and the blocks claimed for Windows nodes, for
// Clean, and says how many it found.
func deleteWindowsNodeObjects(ctx context.Context, c client.Client) (int, error) {
	// calico-node's pods too (rollout.go writes those a rollout replaced).
	pods := &corev1.PodList{}
	apps, err := labels.NewRequirement(appLabel, selection.In, []string{windowsDaemonSet, nodeDaemonSet})
	if err != nil {
		return 0, err
	}
	if err := c.List(ctx, pods, client.InNamespace(calicoNamespace), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*apps)}); err != nil {
		return 0, fmt.Errorf("listing calico-node and calico-node-windows pods: %w", err)
	}
	blocks := &calicov3.IPAMBlockList{}
	if err := ignoreNoMatch(c.List(ctx, blocks, client.HasLabels{simulatedBlockLabel})); err != nil {
		return 0, fmt.Errorf("listing simulated IPAM blocks: %w", err)
	}
	objs := make([]client.Object, 0, len(pods.Items)+len(blocks.Items))
	for i := range pods.Items {
		objs = append(objs, &pods.Items[i])
	}
	for i := range blocks.Items {
		objs = append(objs, &blocks.Items[i])
	}
	for _, obj := range objs {
		if err := client.IgnoreNotFound(c.Delete(ctx, obj, client.GracePeriodSeconds(0))); err != nil {
			return 0, fmt.Errorf("deleting %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	return len(objs), nil
}
