package calicosim

import (
	"context"
	"fmt"
	"net/netip"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// TunnelAnnotation is where calico-node (Felix) records a node's VXLAN tunnel
// address on the Kubernetes Node, in the Kubernetes datastore.
const TunnelAnnotation = "projectcalico.org/IPv4VXLANTunnelAddr"

// felix plays the part of calico-node on each Linux node that winready looks
// at: once an enabled IPv4 pool has VXLAN on (Always or CrossSubnet), every
// Linux node gets a VXLAN tunnel address from it, unless WithholdTunnel
// keeps a node without one (a node whose calico-node is stuck).
type felix struct{ sim *Simulator }

func (r *felix) setup(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "felix"}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-felix").
		WithOptions(controllerOptions()).
		Watches(&calicov3.IPPool{}, all).
		Watches(&corev1.Node{}, all).
		WatchesRawSource(source.Channel(r.sim.felixPokes, all)).
		Complete(r)
}

func (r *felix) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	pools := &calicov3.IPPoolList{}
	if err := r.sim.reader.List(ctx, pools); err != nil {
		return finish(err)
	}
	var vxlan *netip.Prefix
	for _, p := range pools.Items {
		prefix, err := netip.ParsePrefix(p.Spec.CIDR)
		if err == nil && prefix.Addr().Is4() && !p.Spec.Disabled && p.Spec.VXLANMode != "" && p.Spec.VXLANMode != calicov3.VXLANModeNever {
			vxlan = &prefix
			break
		}
	}
	if vxlan == nil {
		return ctrl.Result{}, nil
	}
	nodes := &corev1.NodeList{}
	if err := r.sim.client.List(ctx, nodes); err != nil {
		return finish(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Labels[corev1.LabelOSStable] == "windows" || n.Annotations[TunnelAnnotation] != "" || r.sim.tunnelWithheld(n.Name) {
			continue
		}
		base := n.DeepCopy()
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[TunnelAnnotation] = tunnelAddress(*vxlan, i)
		if err := r.sim.patch(ctx, n, client.MergeFrom(base)); err != nil {
			return finish(fmt.Errorf("annotating node %s: %w", n.Name, err))
		}
	}
	return ctrl.Result{}, nil
}

// tunnelAddress is the i-th node's tunnel address: the first address of the
// i-th /26 block of the pool.
func tunnelAddress(pool netip.Prefix, i int) string {
	a := pool.Masked().Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n += uint32(i)*64 + 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// WithholdTunnel keeps the named nodes without a VXLAN tunnel address, as a
// node whose calico-node never comes up with VXLAN would stay.
func (s *Simulator) WithholdTunnel(nodes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.withheld == nil {
		s.withheld = map[string]bool{}
	}
	for _, n := range nodes {
		s.withheld[n] = true
	}
}

// ReleaseTunnels lets every node get its tunnel address.
func (s *Simulator) ReleaseTunnels() {
	s.mu.Lock()
	s.withheld = nil
	s.mu.Unlock()
	poke(s.felixPokes)
}

func (s *Simulator) tunnelWithheld(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.withheld[node]
}
