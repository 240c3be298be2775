package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/windows"
)

// The join watch reads IPAM blocks through the manager's cache, indexed by
// node (CacheOptions, indexBlocks).
// +kubebuilder:rbac:groups=projectcalico.org;crd.projectcalico.org,resources=ipamblocks,verbs=watch

// joinWatch ends a migration whose every step is done: the cluster is Ready
// for Windows nodes. It then follows each Windows node as it joins: its
// calico-node-windows pod, an IPAM block affine to it, the node Ready. It only
// reads; the status says per node what is done and what is waited for,
// WindowsNodesHealthy sums it up, and an Event names a node that has not
// joined within spec.windowsNodes.joinTimeout. It looks again at the next
// deadline; pod and node events wake it before.
type joinWatch struct{ *Reconciler }

func (r joinWatch) reconcile(ctx context.Context, s *scope) Outcome {
	next, err := r.follow(ctx, s)
	if err != nil {
		return failed(err)
	}
	return stop(conditions.ReasonMigrated, "the cluster is ready for Windows nodes").lookAgain(next)
}

// follow updates status.windowsNodeJoins and says when a node's deadline
// falls due, 0 for none.
func (r joinWatch) follow(ctx context.Context, s *scope) (time.Duration, error) {
	nodes := &corev1.NodeList{}
	// Past the cache, which holds Nodes as metadata only: their Ready
	// condition is needed, for the Windows nodes alone.
	if err := r.APIReader.List(ctx, nodes, client.MatchingLabels{calico.OSLabel: calico.OSWindows}); err != nil {
		return 0, fmt.Errorf("listing windows nodes: %w", err)
	}
	pods := &corev1.PodList{}
	err := r.Client.List(ctx, pods, client.InNamespace(calico.SystemNamespace),
		client.MatchingLabels{windows.PodLabel: windows.PodLabelValue})
	if err != nil {
		return 0, fmt.Errorf("listing calico-node-windows pods: %w", err)
	}
	prev := make(map[string]*v1alpha1.WindowsNodeJoin, len(s.wr.Status.WindowsNodeJoins))
	for i := range s.wr.Status.WindowsNodeJoins {
		prev[s.wr.Status.WindowsNodeJoins[i].Name] = &s.wr.Status.WindowsNodeJoins[i]
	}
	blocks, readable, err := r.affineBlocks(ctx, nodes.Items, prev)
	if err != nil {
		return 0, err
	}
	byNode := windows.PodsByNode(pods.Items)
	readySince, timeout := readySince(s), joinTimeout(s)
	joins := make([]v1alpha1.WindowsNodeJoin, 0, len(nodes.Items))
	var next time.Time
	for i := range nodes.Items {
		n := &nodes.Items[i]
		cur := windows.Evaluate(windows.Node{Node: n, Pod: byNode[n.Name], Block: blocks[n.Name], BlocksUnreadable: !readable})
		cur.WaitingFor = bounded(cur.WaitingFor)
		j, deadline := windows.Advance(prev[n.Name], cur, windows.WatchStart(n, readySince), s.now, timeout)
		if j.State == v1alpha1.JoinOverdue && (prev[n.Name] == nil || prev[n.Name].State != v1alpha1.JoinOverdue) {
			nodeNotJoined(s, n, j, timeout)
		}
		if !deadline.IsZero() && (next.IsZero() || deadline.Before(next)) {
			next = deadline
		}
		joins = append(joins, j)
	}
	status, reason, msg := windows.Summarize(joins, timeout)
	s.set(windows.ConditionHealthy, status, reason, msg)
	s.wr.Status.WindowsNodeJoins = windows.Bound(joins)
	if next.IsZero() {
		return 0, nil
	}
	return next.Sub(s.now), nil
}

// affineBlocks finds an IPAM block affine to each Windows node that had none
// at the last look. A block stays affine to its node until the node is
// deleted (Calico's kube-controllers then release it), so a node that had one
// keeps it, and only the nodes still waiting for one are looked up, in the
// cache's index of blocks by node: a pass costs what changed, not every
// block of the cluster. Where the cache cannot answer (no API served blocks
// when the manager started), the blocks are listed from the API server. The
// boolean is false when no API serves blocks.
func (r joinWatch) affineBlocks(ctx context.Context, nodes []corev1.Node, prev map[string]*v1alpha1.WindowsNodeJoin) (map[string]string, bool, error) {
	blocks := make(map[string]string, len(nodes))
	wanted := map[string]bool{}
	for _, n := range nodes {
		if pj := prev[n.Name]; pj != nil && pj.Block != "" {
			blocks[n.Name] = pj.Block
		} else {
			wanted[n.Name] = true
		}
	}
	if len(wanted) == 0 {
		return blocks, true, nil
	}
	api, err := preflight.DiscoverCalicoAPI(r.Discovery)
	if err != nil {
		return nil, false, err
	}
	affine := func(b calicov3.IPAMBlock) {
		host := windows.AffineHost(b.Spec.Affinity)
		if wanted[host] && b.DeletionTimestamp == nil && (blocks[host] == "" || b.Spec.CIDR < blocks[host]) {
			blocks[host] = b.Spec.CIDR
		}
	}
	err = r.cachedBlocks(ctx, api, wanted, affine)
	if err == nil {
		return blocks, true, nil
	}
	log.FromContext(ctx).V(1).Info("IPAM blocks not in the cache's index, listing them", "error", err.Error())
	readable, err := preflight.EachIPAMBlockPage(ctx, r.APIReader, api, func(page []calicov3.IPAMBlock) error {
		for _, b := range page {
			affine(b)
		}
		return nil
	})
	return blocks, readable, err
}

// cachedBlocks visits the cached blocks affine to each wanted node, through
// the index by node; it fails when the cache has no such index.
func (r joinWatch) cachedBlocks(ctx context.Context, api preflight.CalicoAPI, wanted map[string]bool, visit func(calicov3.IPAMBlock)) error {
	for node := range wanted {
		switch {
		case api.V3["ipamblocks"]:
			list := &calicov3.IPAMBlockList{}
			if err := r.Client.List(ctx, list, client.MatchingFields{blockHostIndex: node}); err != nil {
				return err
			}
			for _, b := range list.Items {
				visit(b)
			}
		case api.V1["ipamblocks"]:
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(crdIPAMBlock().GroupVersionKind().GroupVersion().WithKind("IPAMBlockList"))
			if err := r.Client.List(ctx, list, client.MatchingFields{blockHostIndex: node}); err != nil {
				return err
			}
			for _, u := range list.Items {
				var b calicov3.IPAMBlock
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
					return err
				}
				visit(b)
			}
		default:
			return errors.New("no API serves IPAM blocks")
		}
	}
	return nil
}

// nodeNotJoined records a node that has not joined in time, naming it.
func nodeNotJoined(s *scope, n *corev1.Node, j v1alpha1.WindowsNodeJoin, timeout time.Duration) {
	s.events = append(s.events, passEvent{eventType: corev1.EventTypeWarning, reason: windows.ReasonNotJoined, action: "WatchWindowsNodes",
		note: eventNote("Windows node %s has not joined within %s: waiting for %s", n.Name, timeout, j.WaitingFor), related: n})
}

// readySince is when the cluster last became Ready.
func readySince(s *scope) time.Time {
	if c := conditionOf(s, conditions.Ready); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return s.now
}

func joinTimeout(s *scope) time.Duration {
	if wn := s.wr.Spec.WindowsNodes; wn != nil && wn.JoinTimeout != nil && wn.JoinTimeout.Duration > 0 {
		return wn.JoinTimeout.Duration
	}
	return windows.DefaultJoinTimeout
}

// windowsNodeUpdated passes every change to a Windows node (its status
// included, which a metadata watch sees as a new resourceVersion), so that a
// node turning Ready is seen when it happens. Linux nodes never pass.
func windowsNodeUpdated() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return isWindows(e.ObjectNew) && e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
		},
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
