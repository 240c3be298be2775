package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
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

// watchWindowsNodes follows, once the cluster is Ready, each Windows node as
// it joins: its calico-node-windows pod, an IPAM block affine to it, the node
// Ready. It only reads; the status says per node what is done and what is
// waited for, WindowsNodesHealthy sums it up, and an Event names a node that
// has not joined within spec.windowsNodes.joinTimeout. It wakes up again at
// the next deadline; pod and node events wake it before.
func (p *pass) watchWindowsNodes(ctx context.Context) (ctrl.Result, error) {
	nodes := &corev1.NodeList{}
	// Past the cache, which holds Nodes as metadata only: their Ready
	// condition is needed, for the Windows nodes alone.
	if err := p.r.APIReader.List(ctx, nodes, client.MatchingLabels{calico.OSLabel: calico.OSWindows}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing windows nodes: %w", err)
	}
	pods := &corev1.PodList{}
	err := p.r.Client.List(ctx, pods, client.InNamespace(calico.SystemNamespace),
		client.MatchingLabels{windows.PodLabel: windows.PodLabelValue})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing calico-node-windows pods: %w", err)
	}
	prev := make(map[string]*v1alpha1.WindowsNodeJoin, len(p.wr.Status.WindowsNodeJoins))
	for i := range p.wr.Status.WindowsNodeJoins {
		prev[p.wr.Status.WindowsNodeJoins[i].Name] = &p.wr.Status.WindowsNodeJoins[i]
	}
	blocks, readable, err := p.affineBlocks(ctx, nodes.Items, prev)
	if err != nil {
		return ctrl.Result{}, err
	}
	byNode := windows.PodsByNode(pods.Items)
	now, readySince, timeout := p.r.Clock.Now(), p.readySince(), p.joinTimeout()
	joins := make([]v1alpha1.WindowsNodeJoin, 0, len(nodes.Items))
	var next time.Time
	for i := range nodes.Items {
		n := &nodes.Items[i]
		cur := windows.Evaluate(windows.Node{Node: n, Pod: byNode[n.Name], Block: blocks[n.Name], BlocksUnreadable: !readable})
		cur.WaitingFor = bounded(cur.WaitingFor)
		j, deadline := windows.Advance(prev[n.Name], cur, windows.WatchStart(n, readySince), now, timeout)
		if j.State == v1alpha1.JoinOverdue && (prev[n.Name] == nil || prev[n.Name].State != v1alpha1.JoinOverdue) {
			p.nodeNotJoined(n, j, timeout)
		}
		if !deadline.IsZero() && (next.IsZero() || deadline.Before(next)) {
			next = deadline
		}
		joins = append(joins, j)
	}
	status, reason, msg := windows.Summarize(joins, timeout)
	p.set(windows.ConditionHealthy, status, reason, msg)
	p.wr.Status.WindowsNodeJoins = windows.Bound(joins)
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: next.Sub(now)}, nil
}

// affineBlocks finds an IPAM block affine to each Windows node that had none
// at the last look. A block stays affine to its node until the node is
// deleted (Calico's kube-controllers then release it), so a node that had one
// keeps it, and only the nodes still waiting for one are looked up, in the
// cache's index of blocks by node: a pass costs what changed, not every
// block of the cluster. Where the cache cannot answer (no API served blocks
// when the manager started), the blocks are listed from the API server. The
// boolean is false when no API serves blocks.
func (p *pass) affineBlocks(ctx context.Context, nodes []corev1.Node, prev map[string]*v1alpha1.WindowsNodeJoin) (map[string]string, bool, error) {
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
	api, err := preflight.DiscoverCalicoAPI(p.r.Discovery)
	if err != nil {
		return nil, false, err
	}
	affine := func(b calicov3.IPAMBlock) {
		host := windows.AffineHost(b.Spec.Affinity)
		if wanted[host] && b.DeletionTimestamp == nil && (blocks[host] == "" || b.Spec.CIDR < blocks[host]) {
			blocks[host] = b.Spec.CIDR
		}
	}
	err = p.cachedBlocks(ctx, api, wanted, affine)
	if err == nil {
		return blocks, true, nil
	}
	log.FromContext(ctx).V(1).Info("IPAM blocks not in the cache's index, listing them", "error", err.Error())
	readable, err := preflight.EachIPAMBlockPage(ctx, p.r.APIReader, api, func(page []calicov3.IPAMBlock) error {
		for _, b := range page {
			affine(b)
		}
		return nil
	})
	return blocks, readable, err
}

// cachedBlocks visits the cached blocks affine to each wanted node, through
// the index by node; it fails when the cache has no such index.
func (p *pass) cachedBlocks(ctx context.Context, api preflight.CalicoAPI, wanted map[string]bool, visit func(calicov3.IPAMBlock)) error {
	for node := range wanted {
		switch {
		case api.V3["ipamblocks"]:
			list := &calicov3.IPAMBlockList{}
			if err := p.r.Client.List(ctx, list, client.MatchingFields{blockHostIndex: node}); err != nil {
				return err
			}
			for _, b := range list.Items {
				visit(b)
			}
		case api.V1["ipamblocks"]:
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(crdIPAMBlock().GroupVersionKind().GroupVersion().WithKind("IPAMBlockList"))
			if err := p.r.Client.List(ctx, list, client.MatchingFields{blockHostIndex: node}); err != nil {
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
func (p *pass) nodeNotJoined(n *corev1.Node, j v1alpha1.WindowsNodeJoin, timeout time.Duration) {
	if p.r.Recorder == nil {
		return
	}
	p.r.Recorder.Eventf(p.wr, n, corev1.EventTypeWarning, windows.ReasonNotJoined, "WatchWindowsNodes", "%s",
		eventNote("Windows node %s has not joined within %s: waiting for %s", n.Name, timeout, j.WaitingFor))
}

// readySince is when the cluster last became Ready.
func (p *pass) readySince() time.Time {
	if c := meta.FindStatusCondition(p.wr.Status.Conditions, conditions.Ready); c != nil {
		return c.LastTransitionTime.Time
	}
	return p.r.Clock.Now()
}

func (p *pass) joinTimeout() time.Duration {
	if wn := p.wr.Spec.WindowsNodes; wn != nil && wn.JoinTimeout != nil && wn.JoinTimeout.Duration > 0 {
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
