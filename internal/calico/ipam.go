package calico

import (
	"context"
	"fmt"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GetIPAMConfig reads IPAMConfiguration "default" through projectcalico.org/v3;
// nil when the cluster has none (which Calico treats as strictAffinity false).
func GetIPAMConfig(ctx context.Context, r client.Reader) (*calicov3.IPAMConfiguration, error) {
	return getOrNil(ctx, r, client.ObjectKey{Name: IPAMConfigName}, &calicov3.IPAMConfiguration{})
}

// SetStrictAffinity sets strictAffinity on the IPAM configuration, creating it
// (with Calico's default autoAllocateBlocks true) when cfg is nil. An update
// carries cfg's resourceVersion, so a concurrent change is a conflict.
func SetStrictAffinity(ctx context.Context, c client.Client, cfg *calicov3.IPAMConfiguration, strict bool) error {
	if cfg == nil {
		cfg = &calicov3.IPAMConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: IPAMConfigName},
			Spec:       calicov3.IPAMConfigurationSpec{StrictAffinity: strict, AutoAllocateBlocks: true},
		}
		if err := c.Create(ctx, cfg); err != nil {
			return fmt.Errorf("creating ipamconfiguration %s: %w", IPAMConfigName, err)
		}
		return nil
	}
	base := cfg.DeepCopy()
	cfg.Spec.StrictAffinity = strict
	if err := c.Patch(ctx, cfg, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("setting ipamconfiguration strictAffinity: %w", err)
	}
	return nil
}

// DeleteIPAMConfig deletes the IPAM configuration, if cfg still is the object
// that was read.
func DeleteIPAMConfig(ctx context.Context, c client.Client, cfg *calicov3.IPAMConfiguration) error {
	err := c.Delete(ctx, cfg, client.Preconditions{UID: &cfg.UID, ResourceVersion: &cfg.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ipamconfiguration %s: %w", IPAMConfigName, err)
	}
	return nil
}

// GetIPPool reads the projectcalico.org/v3 IPPool the Tigera operator writes
// for an Installation pool; nil when it does not exist (yet).
func GetIPPool(ctx context.Context, r client.Reader, name string) (*calicov3.IPPool, error) {
	return getOrNil(ctx, r, client.ObjectKey{Name: name}, &calicov3.IPPool{})
}

// ListIPPools lists every projectcalico.org/v3 IPPool in the cluster.
func ListIPPools(ctx context.Context, r client.Reader) ([]calicov3.IPPool, error) {
	list := &calicov3.IPPoolList{}
	if err := r.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing ippools: %w", err)
	}
	return list.Items, nil
}
