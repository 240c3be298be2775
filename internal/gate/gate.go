// Package gate keeps Windows nodes out of a cluster that is not ready for
// them: a ValidatingAdmissionPolicy rejects creating a Node labelled
// kubernetes.io/os=windows while the WindowsReadiness is not Ready. It closes
// the race where a Windows node joins halfway through a migration or rollback.
package gate

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

// Name is the name of the policy and of its binding.
const Name = "winready-windows-node-gate"

const (
	osLabel = "kubernetes.io/os"
	windows = "windows"
)

// rejectWindowsNode is true for a new Node labelled Windows, or a Node
// relabelled Windows; updates of a Node that already was Windows pass, so
// that heartbeats of nodes admitted earlier keep working.
const rejectWindowsNode = `!(has(object.metadata.labels) && ` +
	`'kubernetes.io/os' in object.metadata.labels && object.metadata.labels['kubernetes.io/os'] == 'windows') || ` +
	`(request.operation == 'UPDATE' && has(oldObject.metadata.labels) && ` +
	`'kubernetes.io/os' in oldObject.metadata.labels && oldObject.metadata.labels['kubernetes.io/os'] == 'windows')`

// message names the WindowsReadiness and its phase, read from the object
// itself as the policy's parameter.
const message = `'winready: this cluster is not ready for Windows nodes yet (WindowsReadiness ' + params.metadata.name + ' is ' + ` +
	`(has(params.status) && has(params.status.phase) ? params.status.phase : 'Pending') + '); ` +
	`wait for kubectl wait --for=condition=Ready windowsreadiness/' + params.metadata.name + ', or set spec.windowsNodeGate: Disabled'`

// Wanted reports whether the gate should be in place: unless switched off,
// whenever the cluster is not Windows-ready, rollbacks included.
func Wanted(wr *v1alpha1.WindowsReadiness) bool {
	if wr.Spec.WindowsNodeGate == v1alpha1.GateDisabled {
		return false
	}
	return wr.Spec.Direction == v1alpha1.DirectionRollback || wr.Status.Phase != v1alpha1.PhaseReady
}

// Policy is the gate's policy. It is owned by the WindowsReadiness, so that
// deleting the WindowsReadiness removes it.
func Policy(wr *v1alpha1.WindowsReadiness) *admissionv1.ValidatingAdmissionPolicy {
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: Name, OwnerReferences: owner(wr)},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			ParamKind:     &admissionv1.ParamKind{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WindowsReadiness"},
			MatchConstraints: &admissionv1.MatchResources{
				// Only Nodes labelled Windows (before or after the change) are
				// ever evaluated: a failure to evaluate the policy, such as a
				// parameter kind gone with an uninstalled CRD, can never
				// block a Linux node.
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{osLabel: windows}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule: admissionv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"},
							Scope: ptr.To(admissionv1.ClusterScope),
						},
					},
				}},
			},
			Validations: []admissionv1.Validation{{
				Expression:        rejectWindowsNode,
				MessageExpression: message,
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
}

// Binding binds the policy with the WindowsReadiness as its parameter. A
// missing parameter allows: without a WindowsReadiness there is no gate.
func Binding(wr *v1alpha1.WindowsReadiness) *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: Name, OwnerReferences: owner(wr)},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: Name,
			ParamRef: &admissionv1.ParamRef{
				Name:                    wr.Name,
				ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
			},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

func owner(wr *v1alpha1.WindowsReadiness) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "WindowsReadiness", Name: wr.Name, UID: wr.UID,
	}}
}

// Ensure puts the gate in place or removes it. It writes only what differs.
func Ensure(ctx context.Context, c client.Client, wr *v1alpha1.WindowsReadiness) error {
	policy, binding := Policy(wr), Binding(wr)
	if !Wanted(wr) {
		// The binding first, so that the policy is never bound half-removed.
		for _, obj := range []client.Object{binding, policy} {
			if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing windows node gate %T: %w", obj, err)
			}
		}
		return nil
	}
	if err := apply(ctx, c, policy, &admissionv1.ValidatingAdmissionPolicy{}, func(cur client.Object) bool {
		return equality.Semantic.DeepDerivative(policy.Spec, cur.(*admissionv1.ValidatingAdmissionPolicy).Spec)
	}, func(cur client.Object) { cur.(*admissionv1.ValidatingAdmissionPolicy).Spec = policy.Spec }); err != nil {
		return err
	}
	return apply(ctx, c, binding, &admissionv1.ValidatingAdmissionPolicyBinding{}, func(cur client.Object) bool {
		return equality.Semantic.DeepDerivative(binding.Spec, cur.(*admissionv1.ValidatingAdmissionPolicyBinding).Spec)
	}, func(cur client.Object) { cur.(*admissionv1.ValidatingAdmissionPolicyBinding).Spec = binding.Spec })
}

// apply creates want, or updates the existing object when same says its
// spec differs.
func apply(ctx context.Context, c client.Client, want, cur client.Object, same func(client.Object) bool, set func(client.Object)) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(want), cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating windows node gate %T: %w", want, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading windows node gate %T: %w", want, err)
	case same(cur):
		return nil
	}
	set(cur)
	if err := c.Update(ctx, cur); err != nil {
		return fmt.Errorf("updating windows node gate %T: %w", want, err)
	}
	return nil
}
