package calicosim

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"time"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// poolController plays the operator's IP pool controller (pkg/controller/ippool/pool_controller.go): the
// Installation's spec.calicoNetwork.ipPools is the source of truth for the projectcalico.org/v3 IPPools it owns.
// It also reports TigeraStatus apiserver, whose health is the one thing that decides whether pools may change.
type poolController struct {
	sim       *Simulator
	status    statusManager // ippools
	apiserver statusManager
}

func (r *poolController) setup(mgr ctrl.Manager) error {
	toInstallation := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: installationName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-ippool").
		WithOptions(controllerOptions()).
		For(&operatorv1.Installation{}, builder.WithPredicates(named(installationName))).
		Watches(&calicov3.IPPool{}, toInstallation).
		WatchesRawSource(source.Channel(r.sim.poolPokes, toInstallation)).
		Complete(r)
}

func (r *poolController) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	inst, err := r.sim.installation(ctx)
	if err != nil {
		return finish(err)
	}
	if inst == nil {
		r.status.notFound()
		r.apiserver.notFound()
		return ctrl.Result{}, nil
	}
	r.status.found(inst)
	err = r.reconcile(ctx, inst)
	r.status.observedGeneration = inst.Generation

	wait, serr := r.sim.syncStatus(ctx, &r.status, health{})
	if err == nil {
		err = serr
	}
	wait2, serr := r.syncAPIServer(ctx, inst)
	if err == nil {
		err = serr
	}
	return finish(err, wait, wait2)
}

func (r *poolController) reconcile(ctx context.Context, inst *operatorv1.Installation) error {
	// The real controller waits for the finalizer that core defaulting adds; the simulator adds no finalizers,
	// so it waits for the defaulted CNI settings instead.
	if inst.Spec.CNI == nil || inst.Spec.CNI.Type == "" || inst.Spec.CNI.IPAM == nil {
		r.status.setDegraded(operatorv1.ResourceNotReady, msgWaitingForDefaulting, nil)
		return nil
	}
	current := &calicov3.IPPoolList{}
	if err := r.sim.reader.List(ctx, current); err != nil {
		r.status.setDegraded(operatorv1.ResourceReadError, "error querying IP pools", err)
		return err
	}
	if len(current.Items) == 0 {
		// On first install the pools must lie within the platform's pod network.
		if err := r.withinPodSubnets(ctx, inst); err != nil {
			r.status.setDegraded(operatorv1.ResourceReadError, msgPoolDefaults, err)
			return nil
		}
	}
	if err := r.sim.writeDefaults(ctx, inst, func(spec *operatorv1.InstallationSpec) { fillPoolDefaults(spec, current.Items) }); err != nil {
		r.status.setDegraded(operatorv1.ResourceUpdateError, "Failed to write defaults", err)
		return err
	}
	desired := inst.Spec.CalicoNetwork.IPPools
	apiAvailable := r.sim.apiAvailable()
	ours, notOurs := ownedPools(current.Items, desired)
	// Without a working v3 API the operator writes pools only to bootstrap a cluster that has none.
	writes, notOwned, ok := r.poolWrites(desired, ours, notOurs, apiAvailable || len(current.Items) == 0)
	if !ok {
		return nil
	}

	var deletes []*calicov3.IPPool
	for cidr, p := range ours {
		if !containsCIDR(desired, cidr) {
			if !apiAvailable {
				r.status.setDegraded(operatorv1.ResourceNotReady, msgPoolDeleteUnavailable, nil)
				return nil
			}
			deletes = append(deletes, p)
		}
	}
	if err := r.applyPools(ctx, writes, deletes); err != nil {
		return err
	}
	r.status.readyToMonitor = true
	if !notOwned {
		r.status.clearDegraded()
	}
	return nil
}

// ownedPools splits the cluster's pools by CIDR into the operator's and the others. Pools are the operator's when
// labelled, or when they match an Installation pool exactly (adoption after upgrades).
func ownedPools(current []calicov3.IPPool, desired []operatorv1.IPPool) (ours map[string]*calicov3.IPPool, notOurs map[string]bool) {
	ours, notOurs = map[string]*calicov3.IPPool{}, map[string]bool{}
	for i := range current {
		p := &current[i]
		if p.Labels[managedByLabel] == managedByValue {
			ours[p.Spec.CIDR] = p
			continue
		}
		for _, d := range desired {
			if reflect.DeepEqual(d, fromIPPool(p)) {
				ours[p.Spec.CIDR] = p
			}
		}
		if ours[p.Spec.CIDR] == nil {
			notOurs[p.Spec.CIDR] = true
		}
	}
	return ours, notOurs
}

// poolWrites are the pools to create or update so that the cluster holds the desired ones. notOwned says a desired
// CIDR is held by a pool that is not the operator's; ok is false when a write is needed that mayWrite forbids.
func (r *poolController) poolWrites(desired []operatorv1.IPPool, ours map[string]*calicov3.IPPool, notOurs map[string]bool,
	mayWrite bool) (writes []*calicov3.IPPool, notOwned, ok bool) {
	for _, d := range desired {
		want := toIPPool(d)
		if notOurs[d.CIDR] {
			r.status.setDegraded(operatorv1.ResourceValidationError, msgPoolNotOwned, nil)
			notOwned = true
			continue
		}
		cur := ours[d.CIDR]
		if cur != nil && poolMatches(cur, want) {
			continue
		}
		if !mayWrite {
			r.status.setDegraded(operatorv1.ResourceNotReady, msgPoolsAPIUnavailable, nil)
			return nil, notOwned, false
		}
		if cur != nil {
			updated := cur.DeepCopy()
			updated.Spec = want.Spec
			if updated.Labels == nil {
				updated.Labels = map[string]string{}
			}
			updated.Labels[managedByLabel] = managedByValue
			want = updated
		}
		writes = append(writes, want)
	}
	return writes, notOwned, true
}

// applyPools makes the writes, then the deletions.
func (r *poolController) applyPools(ctx context.Context, writes, deletes []*calicov3.IPPool) error {
	for _, p := range writes {
		var err error
		if p.ResourceVersion == "" {
			err = r.sim.create(ctx, p)
		} else {
			err = r.sim.update(ctx, p)
		}
		if err != nil {
			r.status.setDegraded(operatorv1.ResourceUpdateError, "Error creating / updating IPPools", err)
			return err
		}
	}
	for _, p := range deletes {
		if err := r.sim.delete(ctx, p); err != nil {
			r.status.setDegraded(operatorv1.ResourceUpdateError, "Error deleting IPPools", err)
			return err
		}
	}
	return nil
}

// syncAPIServer reports TigeraStatus apiserver from the simulated API mode: Available with native v3 CRDs (or a
// ready API server), a Deployment still waiting for its replicas otherwise.
func (r *poolController) syncAPIServer(ctx context.Context, inst *operatorv1.Installation) (wait time.Duration, err error) {
	r.apiserver.found(inst)
	r.apiserver.readyToMonitor = true
	var h health
	if !r.sim.apiAvailable() {
		h.progressing = []string{fmt.Sprintf("Deployment %q is not available (awaiting 2 replicas)", calicoNamespace+"/calico-apiserver")}
	}
	return r.sim.syncStatus(ctx, &r.apiserver, h)
}

// toIPPool is the operator's ToProjectCalico.
func toIPPool(p operatorv1.IPPool) *calicov3.IPPool {
	pool := &calicov3.IPPool{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: map[string]string{managedByLabel: managedByValue}},
		Spec:       calicov3.IPPoolSpec{CIDR: p.CIDR, NodeSelector: p.NodeSelector},
	}
	switch p.Encapsulation {
	case operatorv1.EncapsulationIPIP:
		pool.Spec.IPIPMode, pool.Spec.VXLANMode = calicov3.IPIPModeAlways, calicov3.VXLANModeNever
	case operatorv1.EncapsulationIPIPCrossSubnet:
		pool.Spec.IPIPMode, pool.Spec.VXLANMode = calicov3.IPIPModeCrossSubnet, calicov3.VXLANModeNever
	case operatorv1.EncapsulationVXLAN:
		pool.Spec.IPIPMode, pool.Spec.VXLANMode = calicov3.IPIPModeNever, calicov3.VXLANModeAlways
	case operatorv1.EncapsulationVXLANCrossSubnet:
		pool.Spec.IPIPMode, pool.Spec.VXLANMode = calicov3.IPIPModeNever, calicov3.VXLANModeCrossSubnet
	}
	// None leaves both modes empty: with native v3 CRDs nothing defaults them to Never.
	pool.Spec.NATOutgoing = p.NATOutgoing == operatorv1.NATOutgoingEnabled
	if p.DisableNewAllocations != nil {
		pool.Spec.Disabled = *p.DisableNewAllocations
	}
	if p.BlockSize != nil {
		pool.Spec.BlockSize = int(*p.BlockSize)
	}
	if p.DisableBGPExport != nil {
		pool.Spec.DisableBGPExport = *p.DisableBGPExport
	}
	for _, use := range p.AllowedUses {
		pool.Spec.AllowedUses = append(pool.Spec.AllowedUses, calicov3.IPPoolAllowedUse(use))
	}
	mode := calicov3.AssignmentMode(p.AssignmentMode)
	pool.Spec.AssignmentMode = &mode
	return pool
}

// fromIPPool is the operator's FromProjectCalico, used only to recognise pools to adopt.
func fromIPPool(crd *calicov3.IPPool) operatorv1.IPPool {
	p := operatorv1.IPPool{
		Name:                  crd.Name,
		CIDR:                  crd.Spec.CIDR,
		NATOutgoing:           operatorv1.NATOutgoingDisabled,
		NodeSelector:          crd.Spec.NodeSelector,
		BlockSize:             ptrTo(int32(crd.Spec.BlockSize)),
		DisableBGPExport:      ptrTo(crd.Spec.DisableBGPExport),
		DisableNewAllocations: ptrTo(crd.Spec.Disabled),
	}
	switch crd.Spec.IPIPMode {
	case calicov3.IPIPModeAlways:
		p.Encapsulation = operatorv1.EncapsulationIPIP
	case calicov3.IPIPModeCrossSubnet:
		p.Encapsulation = operatorv1.EncapsulationIPIPCrossSubnet
	}
	switch crd.Spec.VXLANMode {
	case calicov3.VXLANModeAlways:
		p.Encapsulation = operatorv1.EncapsulationVXLAN
	case calicov3.VXLANModeCrossSubnet:
		p.Encapsulation = operatorv1.EncapsulationVXLANCrossSubnet
	}
	if crd.Spec.NATOutgoing {
		p.NATOutgoing = operatorv1.NATOutgoingEnabled
	}
	for _, use := range crd.Spec.AllowedUses {
		p.AllowedUses = append(p.AllowedUses, operatorv1.IPPoolAllowedUse(use))
	}
	if crd.Spec.AssignmentMode != nil {
		p.AssignmentMode = operatorv1.AssignmentMode(*crd.Spec.AssignmentMode)
	}
	return p
}

func poolMatches(cur, want *calicov3.IPPool) bool {
	return cur.Labels[managedByLabel] == managedByValue &&
		equality.Semantic.DeepEqual(cur.Spec, want.Spec)
}

func containsCIDR(pools []operatorv1.IPPool, cidr string) bool {
	for _, p := range pools {
		if p.CIDR == cidr {
			return true
		}
	}
	return false
}

// withinPodSubnets is the kubeadm part of fillDefaults (pkg/controller/ippool/defaults.go): with a kubeadm-config
// ConfigMap, every Installation pool must lie within one of its podSubnet CIDRs (comma-separated in dual stack).
func (r *poolController) withinPodSubnets(ctx context.Context, inst *operatorv1.Installation) error {
	cm := &corev1.ConfigMap{}
	err := r.sim.reader.Get(ctx, types.NamespacedName{Namespace: kubeSystem, Name: kubeadmConfigName}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unable to read kubeadm config map: %s", err.Error())
	}
	var subnets []string
	for _, v := range cm.Data {
		if m := podSubnetLine.FindStringSubmatch(v); m != nil {
			subnets = strings.Split(strings.TrimSpace(m[1]), ",")
			break
		}
	}
	if inst.Spec.CalicoNetwork == nil {
		return nil
	}
	for _, pool := range inst.Spec.CalicoNetwork.IPPools {
		within := false
		for _, c := range subnets {
			within = within || cidrWithin(c, pool.CIDR)
		}
		if !within {
			return fmt.Errorf("could not resolve CalicoNetwork IPPool and kubeadm configuration: "+
				"IPPool %v is not within the platform's configured pod network CIDR(s) %v", pool.CIDR, subnets)
		}
	}
	return nil
}

var podSubnetLine = regexp.MustCompile(`podSubnet: (.*)`)

// cidrWithin reports whether every address of pool lies in outer.
func cidrWithin(outer, pool string) bool {
	o, err1 := netip.ParsePrefix(strings.TrimSpace(outer))
	p, err2 := netip.ParsePrefix(pool)
	return err1 == nil && err2 == nil && o.Bits() <= p.Bits() && o.Contains(p.Masked().Addr())
}
