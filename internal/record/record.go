// Package record keeps the one durable copy of the originals outside the
// WindowsReadiness: a ConfigMap in winready's namespace, written before the
// first change to the cluster, read back when the WindowsReadiness is
// deleted and applied again (a GitOps prune, a restore without status, a
// mistaken delete), and deleted only after a finished rollback. It has no
// owner reference, so deleting the WindowsReadiness leaves it in place.
package record

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

const (
	// Name is the ConfigMap's name.
	Name = "winready-originals"
	// key holds the originals as JSON.
	key = "originals.json"
	// Label marks the ConfigMap, so that people and tools can find it.
	Label = "winready.io/originals"
)

// Load reads the record from namespace ns; nil when there is none. A record
// written by an earlier winready is completed from the cluster (Complete).
func Load(ctx context.Context, r client.Reader, ns string) (*v1alpha1.Originals, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: Name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the record of the originals %s/%s: %w", ns, Name, err)
	}
	o := &v1alpha1.Originals{}
	if err := json.Unmarshal([]byte(cm.Data[key]), o); err != nil {
		return nil, fmt.Errorf("decoding the record of the originals %s/%s (repair or delete it): %w", ns, Name, err)
	}
	return o, Complete(ctx, r, o)
}

// Save writes the record unless one exists, and says whether it did: the
// first record is the one that describes the cluster before any change, and
// it is never overwritten.
func Save(ctx context.Context, c client.Client, ns string, o *v1alpha1.Originals) (created bool, err error) {
	data, err := json.Marshal(o)
	if err != nil {
		return false, fmt.Errorf("encoding the originals: %w", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name, Labels: map[string]string{Label: "true"},
			Annotations: map[string]string{"winready.io/description": "the values winready's migration changed, as they were " +
				"before; read by a rollback. Delete it only to make the cluster as it is now count as the original."}},
		Data: map[string]string{key: string(data)},
	}
	switch err := c.Create(ctx, cm); {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("writing the record of the originals %s/%s: %w", ns, Name, err)
	}
	return true, nil
}

// Delete removes the record after a finished rollback.
func Delete(ctx context.Context, c client.Client, ns string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name}}
	if err := c.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the record of the originals %s/%s: %w", ns, Name, err)
	}
	return nil
}

// Migrated lists the recorded values that already are the migration's
// targets and that no cluster has before a migration: originals recorded
// from a cluster that was (partly) migrated already, which a rollback could
// not restore.
func Migrated(o *v1alpha1.Originals) []string {
	var out []string
	if o.BGP.Present && o.BGP.Value == "Disabled" {
		out = append(out, "spec.calicoNetwork.bgp Disabled")
	}
	if o.WindowsDataplane.Present && o.WindowsDataplane.Value == "HNS" {
		out = append(out, "spec.calicoNetwork.windowsDataplane HNS")
	}
	return out
}
