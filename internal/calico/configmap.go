package calico

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GetServicesEndpoint reads tigera-operator/kubernetes-services-endpoint; nil
// when absent.
func GetServicesEndpoint(ctx context.Context, r client.Reader) (*corev1.ConfigMap, error) {
	return getOrNil(ctx, r, client.ObjectKey{Namespace: OperatorNamespace, Name: ServicesEndpointConfigMap}, &corev1.ConfigMap{})
}

// SetServicesEndpoint makes the ConfigMap hold exactly the given values for
// its two keys (a key whose value is "" is removed) and leaves other keys
// alone, and claims it (ClaimLabel). cm is the object read, nil when absent;
// an update is guarded by its resourceVersion.
func SetServicesEndpoint(ctx context.Context, c client.Client, cm *corev1.ConfigMap, want map[string]string) error {
	if cm == nil {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: ServicesEndpointConfigMap,
				Labels: map[string]string{ClaimLabel: "true"}},
			Data: map[string]string{},
		}
		for k, v := range want {
			if v != "" {
				cm.Data[k] = v
			}
		}
		if err := c.Create(ctx, cm); err != nil {
			return fmt.Errorf("creating configmap %s/%s: %w", OperatorNamespace, ServicesEndpointConfigMap, err)
		}
		return nil
	}
	base := cm.DeepCopy()
	cm.Labels = maps.Clone(cm.Labels)
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[ClaimLabel] = "true"
	cm.Data = maps.Clone(cm.Data)
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	for k, v := range want {
		if v == "" {
			delete(cm.Data, k)
		} else {
			cm.Data[k] = v
		}
	}
	if err := c.Patch(ctx, cm, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating configmap %s/%s: %w", OperatorNamespace, ServicesEndpointConfigMap, err)
	}
	return nil
}

// DeleteServicesEndpoint deletes the ConfigMap if it still is the one read,
// claiming it first when an earlier winready created it unclaimed: admission
// lets the manager delete only what it claims.
func DeleteServicesEndpoint(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	if err := Claim(ctx, c, cm); err != nil {
		return err
	}
	err := c.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting configmap %s/%s: %w", OperatorNamespace, ServicesEndpointConfigMap, err)
	}
	return nil
}
