package calicosim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// windowsController plays the operator's Windows controller (pkg/controller/installation/windows_controller.go):
// once windowsDataplane is HNS it renders calico-node-windows and reports TigeraStatus calico-windows. It never
// calls SetMetaData, so calico-windows conditions carry observedGeneration 0. Turning Windows off again leaves the
// DaemonSet and the last status in place, as the operator does.
type windowsController struct {
	sim    *Simulator
	status statusManager
}

func (r *windowsController) setup(mgr ctrl.Manager) error {
	toInstallation := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: installationName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("calicosim-windows").
		WithOptions(controllerOptions()).
		For(&operatorv1.Installation{}, builder.WithPredicates(named(installationName))).
		Watches(&operatorv1.Installation{}, toInstallation, builder.WithPredicates(named(overlayName))).
		Watches(&corev1.ConfigMap{}, toInstallation, builder.WithPredicates(inNamespace(operatorNamespace), named(servicesEndpointCM))).
		// Edits to the rendered DaemonSet are put right, as the operator's component handler does.
		Watches(&appsv1.DaemonSet{}, toInstallation, builder.WithPredicates(inNamespace(calicoNamespace), named(windowsDaemonSet))).
		Watches(&corev1.Service{}, toInstallation, builder.WithPredicates(dnsServiceOfAnyProvider())).
		Watches(&calicov3.IPAMConfiguration{}, toInstallation, builder.WithPredicates(named(ipamConfigName))).
		Watches(&calicov3.FelixConfiguration{}, toInstallation, builder.WithPredicates(named(felixConfigName))).
		Watches(&operatorv1.ImageSet{}, toInstallation).
		WatchesRawSource(source.Channel(r.sim.windowsPokes, toInstallation)).
		Complete(r)
}

func (r *windowsController) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	inst, err := r.sim.installation(ctx)
	if err != nil {
		return finish(err)
	}
	if inst == nil {
		r.status.notFound()
		return ctrl.Result{}, nil
	}
	if windowsEnabled(&inst.Spec) {
		r.status.found(inst)
		err = r.reconcile(ctx, inst)
	} else if inst.UID != r.status.installUID {
		r.status.notFound()
	}
	// With Windows off the status is still flushed: a change that was waiting out StatusLag still lands.
	wait, serr := r.sim.syncStatus(ctx, &r.status, health{})
	if err == nil {
		err = serr
	}
	return finish(err, wait)
}

// reconcile checks the prerequisites in the operator's order: the services endpoint ConfigMap, the Installation
// status, validation, spec.windowsNodes, FelixConfiguration, the IPAM configuration's strictAffinity, the cluster
// DNS Service of the provider and the VXLAN VNI; the first one missing is the Degraded message.
func (r *windowsController) reconcile(ctx context.Context, inst *operatorv1.Installation) error {
	ep, ok, err := r.validInstallation(ctx, inst)
	if !ok {
		return err
	}
	felix := &calicov3.FelixConfiguration{}
	if err := r.sim.reader.Get(ctx, types.NamespacedName{Name: felixConfigName}, felix); client.IgnoreNotFound(err) != nil {
		r.status.setDegraded(operatorv1.ResourceReadError, "Unable to read FelixConfiguration", err)
		return err
	}
	if ok, err := r.strictAffinity(ctx, inst); !ok {
		return err
	}
	// The operator looks the DNS Service up by the provider it detected, which it also writes into the
	// Installation's spec.kubernetesProvider; the simulator detects nothing and takes the spec's.
	dnsKey := dnsService(inst.Spec.KubernetesProvider)
	dns := &corev1.Service{}
	if err := r.sim.reader.Get(ctx, dnsKey, dns); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.setDegraded(operatorv1.ResourceNotFound, fmt.Sprintf("%s service not found", dnsKey.Name), err)
			return nil
		}
		r.status.setDegraded(operatorv1.ResourceReadError, fmt.Sprintf("Error querying %s service", dnsKey.Name), err)
		return err
	}
	if felix.Spec.VXLANVNI == nil {
		r.status.setDegraded(operatorv1.ResourceReadError, msgVNIRead, errors.New(errVNIMissing))
		return nil
	}
	if msg, err := r.sim.windowsImageSet(ctx); err != nil {
		r.status.setDegraded(operatorv1.ResourceReadError, "Error getting ImageSet", err)
		return err
	} else if msg != "" {
		r.status.setDegraded(operatorv1.ResourceValidationError, "Error resolving ImageSet for components", errors.New(msg))
		return nil
	}
	if err := r.sim.applyDaemonSet(ctx, renderCalicoNodeWindows(&inst.Spec, ep, dns.Spec.ClusterIPs, *felix.Spec.VXLANVNI)); err != nil {
		r.status.setDegraded(operatorv1.ResourceUpdateError, "Error creating / updating resource", err)
		return err
	}
	r.status.readyToMonitor = true
	r.status.clearDegraded()
	return nil
}

// validInstallation checks the first prerequisites: the services endpoint ConfigMap, the Installation status,
// validation before and after the overlay is merged, and spec.windowsNodes. ok is false when one is missing (the
// status is Degraded, and err set when it is worth a retry); ep is the API server address calico-node-windows gets.
func (r *windowsController) validInstallation(ctx context.Context, inst *operatorv1.Installation) (ep serviceEndpoint, ok bool, err error) {
	cm := &corev1.ConfigMap{}
	if err := r.sim.reader.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: servicesEndpointCM}, cm); err != nil {
		// PopulateK8sServiceEndPoint ignores a missing ConfigMap; the Windows controller checks for it first.
		r.status.setDegraded(operatorv1.ResourceReadError, msgServicesEndpointRead, err)
		return ep, false, client.IgnoreNotFound(err)
	}
	if ep, err = r.sim.populateEndpoint(ctx, inst, cm); err != nil {
		r.status.setDegraded(operatorv1.ResourceReadError, msgServicesEndpointRead, err)
		return ep, false, err
	}
	if inst.Status.Variant == "" && inst.Status.Computed == nil {
		r.status.setDegraded(operatorv1.ResourceNotReady, msgInstallationStatusEmpty, errors.New(msgInstallationStatusEmpty))
		return ep, false, nil
	}
	if err := validateInstallation(&inst.Spec, ep); err != nil {
		r.status.setDegraded(operatorv1.InvalidConfigurationError, msgInvalidInstallation, err)
		return ep, false, nil
	}
	// The overlay is merged after validation, and the merged spec validated again (windows_controller.go).
	if err := r.sim.mergeOverlay(ctx, inst); err != nil {
		r.status.setDegraded(operatorv1.ResourceReadError, "An error occurred when querying the 'overlay' Installation resource", err)
		return ep, false, err
	}
	if err := validateInstallation(&inst.Spec, ep); err != nil {
		r.status.setDegraded(operatorv1.InvalidConfigurationError, msgInvalidInstallation, err)
		return ep, false, nil
	}
	if inst.Spec.WindowsNodes == nil {
		// Core defaulting has not written spec.windowsNodes yet; its patch wakes this controller again.
		r.status.setDegraded(operatorv1.ResourceNotReady, msgWindowsNodesNil, errors.New(msgWindowsNodesNil))
		return ep, false, nil
	}
	return ep, true, nil
}

// strictAffinity checks, with Calico IPAM, that the IPAM configuration sets strictAffinity; ok is false (and the
// status Degraded) when it does not or cannot be read.
func (r *windowsController) strictAffinity(ctx context.Context, inst *operatorv1.Installation) (ok bool, err error) {
	cni := inst.Spec.CNI
	if cni == nil || cni.Type != operatorv1.PluginCalico || cni.IPAM == nil || cni.IPAM.Type != operatorv1.IPAMPluginCalico {
		return true, nil
	}
	ipam := &calicov3.IPAMConfiguration{}
	err = r.sim.reader.Get(ctx, types.NamespacedName{Name: ipamConfigName}, ipam)
	if err != nil && !apierrors.IsNotFound(err) {
		r.status.setDegraded(operatorv1.ResourceReadError, "Unable to read IPAMConfiguration", err)
		return false, err
	}
	// A missing IPAMConfiguration reads as strictAffinity false.
	if !ipam.Spec.StrictAffinity {
		r.status.setDegraded(operatorv1.ResourceReadError, msgStrictAffinity, errors.New(errStrictAffinity))
		return false, nil
	}
	return true, nil
}

// dnsService is the cluster DNS Service the operator's Windows controller reads for a provider (pkg/controller/utils
// GetDNSServiceName).
func dnsService(provider operatorv1.Provider) types.NamespacedName {
	switch {
	case provider.IsOpenShift():
		return types.NamespacedName{Namespace: "openshift-dns", Name: "dns-default"}
	case provider.IsRKE2():
		return types.NamespacedName{Namespace: kubeSystem, Name: rke2DNSName}
	}
	return types.NamespacedName{Namespace: kubeSystem, Name: kubeDNSName}
}

// dnsServiceOfAnyProvider selects the DNS Services of every provider: the Installation's provider is read at
// reconcile time.
func dnsServiceOfAnyProvider() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		key := client.ObjectKeyFromObject(o)
		for _, p := range []operatorv1.Provider{operatorv1.ProviderNone, operatorv1.ProviderRKE2, operatorv1.ProviderOpenShift} {
			if key == dnsService(p) {
				return true
			}
		}
		return false
	})
}

// windowsImageSet is imageset.GetImageSet and ResolveImages for calico-node-windows: once any ImageSet exists, the
// one named calico-<version> must list the Windows images; "" when they resolve.
func (s *Simulator) windowsImageSet(ctx context.Context) (string, error) {
	list := &operatorv1.ImageSetList{}
	if err := s.reader.List(ctx, list); err != nil {
		return "", fmt.Errorf("failed to get imageset list: %w", err)
	}
	for _, is := range list.Items {
		if is.Name != "calico-"+s.calicoVersionNow() {
			continue
		}
		var missing []string
		for _, want := range []string{"calico/cni-windows", "calico/node-windows"} {
			found := false
			for _, img := range is.Spec.Images {
				found = found || img.Image == want
			}
			if !found {
				missing = append(missing, "ImageSet did not contain image "+want)
			}
		}
		if len(missing) > 0 {
			return "invalid ImageSet: " + strings.Join(missing, ","), nil
		}
	}
	return "", nil
}
