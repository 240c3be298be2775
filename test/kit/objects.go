package kit

import (
	"context"
	"errors"
	"time"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// The reads and writes below take any client, for suites that run their own
// control plane: the same helpers serve the kit's Cluster (Client()), the
// test/kit/look layer for Gomega, and winready's own suites.

// GetWindowsReadiness reads the WindowsReadiness "default".
func GetWindowsReadiness(ctx context.Context, c client.Reader) (*v1alpha1.WindowsReadiness, error) {
	wr := &v1alpha1.WindowsReadiness{}
	if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.Name}, wr); err != nil {
		return nil, err
	}
	return wr, nil
}

// UpdateWindowsReadiness changes the WindowsReadiness "default" with mutate,
// sent as a merge patch of what mutate changed: winready writes the status
// on every pass, and a whole-object update guarded by the resourceVersion
// would race each of those writes (under load, every retry lost to one).
func UpdateWindowsReadiness(ctx context.Context, c client.Client, mutate func(*v1alpha1.WindowsReadiness)) error {
	wr, err := GetWindowsReadiness(ctx, c)
	if err != nil {
		return err
	}
	base := wr.DeepCopy()
	mutate(wr)
	return c.Patch(ctx, wr, client.MergeFrom(base))
}

// ForgetWindowsReadiness deletes the WindowsReadiness "default" with no
// manager running to let it go: it lifts winready's claims as an admin while
// the object still exists (admission requires it for a write to a claimed
// object), removes its finalizers, deletes it and waits until it is gone.
// recordNamespace is where the record of the originals lives.
func ForgetWindowsReadiness(ctx context.Context, c client.Client, recordNamespace string) error {
	wr, err := GetWindowsReadiness(ctx, c)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if err := LiftClaims(ctx, c, recordNamespace); err != nil {
		return err
	}
	if len(wr.Finalizers) > 0 {
		if err := UpdateWindowsReadiness(ctx, c, func(wr *v1alpha1.WindowsReadiness) { wr.Finalizers = nil }); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if err := client.IgnoreNotFound(c.Delete(ctx, wr)); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := GetWindowsReadiness(ctx, c)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// LiftClaims lifts winready's claim, as an admin, from every object that may
// carry it: the Installation, the services endpoint, calico-node and the
// record in recordNamespace. A write to a claimed object needs the
// WindowsReadiness, so this comes while it exists.
func LiftClaims(ctx context.Context, c client.Client, recordNamespace string) error {
	for _, obj := range []client.Object{
		&operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: calico.SystemNamespace, Name: calico.NodeDaemonSet}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: recordNamespace, Name: "winready-originals"}},
	} {
		if err := retry.OnError(updateBackoff, func(err error) bool { return errors.Is(err, calico.ErrGuardFailed) }, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return client.IgnoreNotFound(err)
			}
			return client.IgnoreNotFound(calico.Unclaim(ctx, c, obj))
		}); err != nil {
			return err
		}
	}
	return nil
}

// LiftWindowsNodeGate switches the Windows join gate off, both halves: the
// WindowsReadiness's spec.windowsNodeGate, and the label on Installation
// default that the manager cannot write (config/admission/gate.yaml).
func LiftWindowsNodeGate(ctx context.Context, c client.Client) error {
	if err := UpdateWindowsReadiness(ctx, c, func(wr *v1alpha1.WindowsReadiness) {
		wr.Spec.WindowsNodeGate = v1alpha1.GateDisabled
	}); err != nil {
		return err
	}
	return retry.RetryOnConflict(updateBackoff, func() error {
		inst, err := GetInstallation(ctx, c)
		if err != nil {
			return err
		}
		if inst.Labels == nil {
			inst.Labels = map[string]string{}
		}
		inst.Labels[v1alpha1.WindowsNodeGateLabel] = string(v1alpha1.GateDisabled)
		return c.Update(ctx, inst)
	})
}

// updateBackoff spaces the tries of an update that lost to another writer:
// winready writes its status after each pass, several times a second while
// a migration moves.
var updateBackoff = wait.Backoff{Steps: 20, Duration: 10 * time.Millisecond, Factor: 2, Cap: time.Second, Jitter: 0.1}

// GetInstallation reads the Installation "default".
func GetInstallation(ctx context.Context, c client.Reader) (*operatorv1.Installation, error) {
	inst := &operatorv1.Installation{}
	if err := c.Get(ctx, client.ObjectKey{Name: calico.InstallationName}, inst); err != nil {
		return nil, err
	}
	return inst, nil
}

// GetIPAMConfig reads the IPAMConfiguration "default"; nil when there is none.
func GetIPAMConfig(ctx context.Context, c client.Reader) (*calicov3.IPAMConfiguration, error) {
	cfg := &calicov3.IPAMConfiguration{}
	err := c.Get(ctx, client.ObjectKey{Name: calico.IPAMConfigName}, cfg)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cfg, err
}

// GetServicesEndpoint reads the kubernetes-services-endpoint ConfigMap of
// tigera-operator; nil when there is none.
func GetServicesEndpoint(ctx context.Context, c client.Reader) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cm, err
}

// Condition is a condition of the status, or an empty one.
func Condition(wr *v1alpha1.WindowsReadiness, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(wr.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// Step is a step of the status, or an empty one.
func Step(wr *v1alpha1.WindowsReadiness, name v1alpha1.StepName) v1alpha1.StepStatus {
	for _, s := range wr.Status.Steps {
		if s.Name == name {
			return s
		}
	}
	return v1alpha1.StepStatus{}
}

// Check is a preflight check of the status, or an empty one.
func Check(wr *v1alpha1.WindowsReadiness, name string) v1alpha1.PreflightCheck {
	if pf := wr.Status.Preflight; pf != nil {
		for _, c := range pf.Checks {
			if c.Name == name {
				return c
			}
		}
	}
	return v1alpha1.PreflightCheck{}
}
