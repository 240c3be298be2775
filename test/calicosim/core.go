package calicosim

import (
	"context"
	"slices"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/winready/winready/internal/calico"
)

const calicoVersion = "v3.32.0" // the simulated release's; SetCalicoVersion reports another

// coreController plays the operator's core Installation controller (pkg/controller/installation/
// core_controller.go): it defaults and validates the Installation, renders calico-node, reports TigeraStatus
// calico and writes Installation status.computed once everything is available.
type coreController struct {
	sim    *Simulator
	status statusManager
}

func (r *coreController) setup(mgr ctrl.Manager) error {
	toInstallation := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: installationName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-installation").
		WithOptions(controllerOptions()).
		For(&operatorv1.Installation{}, builder.WithPredicates(named(installationName))).
		Watches(&operatorv1.Installation{}, toInstallation, builder.WithPredicates(named(overlayName))).
		Watches(&corev1.ConfigMap{}, toInstallation, builder.WithPredicates(inNamespace(operatorNamespace), named(servicesEndpointCM))).
		Watches(&appsv1.DaemonSet{}, toInstallation, builder.WithPredicates(inNamespace(calicoNamespace), named(nodeDaemonSet), notMetadataOnly)).
		Watches(&calicov3.IPPool{}, toInstallation).
		Watches(&calicov3.FelixConfiguration{}, toInstallation, builder.WithPredicates(named(felixConfigName))).
		WatchesRawSource(source.Channel(r.sim.corePokes, toInstallation)).
		Complete(r)
}

func (r *coreController) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	inst, err := r.sim.installation(ctx)
	if err != nil {
		return finish(err)
	}
	if inst == nil {
		r.status.notFound()
		return ctrl.Result{}, nil
	}
	r.sim.interrupted(ctx)
	r.status.found(inst)
	// calico-node is the one workload this simulation renders for TigeraStatus calico to watch.
	r.status.daemonSets = []types.NamespacedName{daemonSetKey(nodeDaemonSet)}
	done, err := r.reconcile(ctx, inst)
	// SetMetaData: the conditions describe the generation this reconcile saw (after its own defaults patch).
	r.status.observedGeneration = inst.Generation

	h, herr := r.sim.daemonSetHealth(ctx, r.status.daemonSets)
	if herr != nil {
		return finish(herr)
	}
	if fault := r.sim.currentFault(); fault != "" {
		h.failing = append(h.failing, fault)
	}
	wait, serr := r.sim.syncStatus(ctx, &r.status, h)
	if err == nil {
		err = serr
	}
	if err == nil && done && r.status.available(h) {
		// status.computed is the merged spec, overlay included.
		err = r.writeComputed(ctx, inst)
	}
	return finish(err, wait)
}

// reconcile does the work of one pass; done says it got to the end, as the operator's ReadyToMonitor does.
func (r *coreController) reconcile(ctx context.Context, inst *operatorv1.Installation) (bool, error) {
	pools := &calicov3.IPPoolList{}
	if err := r.sim.reader.List(ctx, pools); err != nil {
		return false, err
	}
	cm, err := r.sim.servicesEndpoint(ctx)
	if err != nil {
		r.status.setDegraded(operatorv1.ResourceReadError, msgServicesEndpointRead, err)
		return false, err
	}
	// Validation reads the address the operator holds from an earlier read of the ConfigMap (or its pod's
	// environment); the ConfigMap is read again only afterwards.
	remembered, err := r.sim.rememberedEndpoint(ctx, inst, cm)
	if err != nil {
		return false, err
	}

	if valid, err := r.defaultAndValidate(ctx, inst, pools.Items, remembered); !valid {
		return false, err
	}
	if !slices.ContainsFunc(pools.Items, func(p calicov3.IPPool) bool { return !p.Spec.Disabled }) {
		r.status.setDegraded(operatorv1.ResourceNotFound, msgWaitingForPools, nil)
		return false, nil
	}

	if err := r.sim.defaultFelixConfiguration(ctx); err != nil {
		r.status.setDegraded(operatorv1.ResourceUpdateError, "Unable to patch FelixConfiguration", err)
		return false, err
	}
	// The operator reads the ConfigMap for rendering late in its reconcile (core_controller.go, after its defaults
	// patch), long after it read the Installation: a ConfigMap written just after an Installation change is
	// rendered together with it.
	if cm, err = r.sim.servicesEndpoint(ctx); err != nil {
		r.status.setDegraded(operatorv1.ResourceReadError, msgServicesEndpointRead, err)
		return false, err
	}
	rendered, err := r.sim.populateEndpoint(ctx, inst, cm)
	if err != nil {
		return false, err
	}
	if err := r.sim.applyDaemonSet(ctx, renderCalicoNode(&inst.Spec, rendered)); err != nil {
		r.status.setDegraded(operatorv1.ResourceUpdateError, "Error creating / updating resource", err)
		return false, err
	}
	r.status.readyToMonitor = true
	r.status.clearDegraded()
	return true, nil
}

// defaultAndValidate validates the defaulted spec, writes the defaults into the Installation and validates again
// with the overlay merged over it; valid is false when a validation failed (Degraded) or a write did (err).
func (r *coreController) defaultAndValidate(ctx context.Context, inst *operatorv1.Installation, pools []calicov3.IPPool,
	remembered serviceEndpoint) (valid bool, err error) {
	// Validation runs on the defaulted spec, and an invalid one is not even defaulted.
	defaulted := inst.Spec.DeepCopy()
	fillCoreDefaults(defaulted, pools)
	if err := validateInstallation(defaulted, remembered); err != nil {
		r.status.setDegraded(operatorv1.InvalidConfigurationError, msgInvalidInstallation, err)
		return false, nil
	}
	if err := r.sim.writeDefaults(ctx, inst, func(spec *operatorv1.InstallationSpec) { fillCoreDefaults(spec, pools) }); err != nil {
		r.status.setDegraded(operatorv1.ResourceUpdateError, "Failed to write defaults", err)
		return false, err
	}

	// Only the base is written back; the overlay is merged over it for rendering, and the merged spec is validated
	// again (core_controller.go).
	if err := r.sim.mergeOverlay(ctx, inst); err != nil {
		return false, err
	}
	if err := validateInstallation(&inst.Spec, remembered); err != nil {
		r.status.setDegraded(operatorv1.InvalidConfigurationError, msgInvalidComputed, err)
		return false, nil
	}
	return true, nil
}

// writeComputed records the spec that is now fully in effect, as the operator does only after an available
// reconcile.
func (r *coreController) writeComputed(ctx context.Context, inst *operatorv1.Installation) error {
	v := r.sim.calicoVersionNow()
	if inst.Status.Variant == operatorv1.Calico && inst.Status.CalicoVersion == v &&
		equality.Semantic.DeepEqual(inst.Status.Computed, &inst.Spec) {
		return nil
	}
	inst.Status.Variant = operatorv1.Calico
	inst.Status.CalicoVersion = v
	inst.Status.Computed = inst.Spec.DeepCopy()
	return r.sim.updateStatus(ctx, inst)
}

// servicesEndpoint reads ConfigMap tigera-operator/kubernetes-services-endpoint; nil when it does not exist.
func (s *Simulator) servicesEndpoint(ctx context.Context) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := s.reader.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: servicesEndpointCM}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return cm, nil
}

// controllerOptions lets several managers in one test process register controllers of the same name.
func controllerOptions() controller.Options {
	return controller.Options{SkipNameValidation: ptrTo(true)}
}

// notMetadataOnly drops DaemonSet updates that change neither the generation nor the status. The operator's watch
// passes generation changes only (utils.createPredicateForObject) and its status manager follows the status on
// its own; the simulator wakes on both, and like the operator not on metadata alone: calico-node's ignore
// annotation coming off wakes neither.
var notMetadataOnly = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*appsv1.DaemonSet)
	n, ok2 := e.ObjectNew.(*appsv1.DaemonSet)
	return !ok1 || !ok2 || o.Generation != n.Generation || !equality.Semantic.DeepEqual(o.Status, n.Status)
}}

func named(name string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name })
}

func inNamespace(namespaces ...string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		for _, ns := range namespaces {
			if o.GetNamespace() == ns {
				return true
			}
		}
		return false
	})
}

// defaultFelixConfiguration is setDefaultsOnFelixConfiguration, reduced to the VXLAN settings: FelixConfiguration
// "default" is created when missing, and vxlanVNI and vxlanPort are set when unset.
func (s *Simulator) defaultFelixConfiguration(ctx context.Context) error {
	fc := &calicov3.FelixConfiguration{}
	err := s.reader.Get(ctx, types.NamespacedName{Name: felixConfigName}, fc)
	if apierrors.IsNotFound(err) {
		fc = &calicov3.FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: felixConfigName},
			Spec: calicov3.FelixConfigurationSpec{VXLANVNI: ptrTo(defaultVXLANVNI), VXLANPort: ptrTo(defaultVXLANPort)}}
		return s.create(ctx, fc)
	}
	if err != nil {
		return err
	}
	if fc.Spec.VXLANVNI != nil && fc.Spec.VXLANPort != nil {
		return nil
	}
	base := fc.DeepCopy()
	if fc.Spec.VXLANVNI == nil {
		fc.Spec.VXLANVNI = ptrTo(defaultVXLANVNI)
	}
	if fc.Spec.VXLANPort == nil {
		fc.Spec.VXLANPort = ptrTo(defaultVXLANPort)
	}
	return s.patch(ctx, fc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// mergeOverlay merges Installation "overlay", when it exists, over inst's spec in memory, as the operator's core
// and Windows controllers do before rendering (pkg/controller/utils/merge.go).
func (s *Simulator) mergeOverlay(ctx context.Context, inst *operatorv1.Installation) error {
	overlay := &operatorv1.Installation{}
	if err := s.reader.Get(ctx, types.NamespacedName{Name: overlayName}, overlay); err != nil {
		return client.IgnoreNotFound(err)
	}
	inst.Spec = calico.MergeOverlay(inst.Spec, overlay.Spec)
	return nil
}
