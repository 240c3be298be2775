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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

const (
	// Name is the ConfigMap's name.
	Name = "winready-originals"
	// key holds the originals as JSON.
	key = "originals.json"
	// Label marks the ConfigMap, so that people and tools can find it.
	Label = "winready.io/originals"
)

// Record is the record as read: the originals it holds, and what says who
// wrote it.
type Record struct {
	// Originals are the values before the first change.
	Originals *v1alpha1.Originals
	// WrittenFor is the UID of the WindowsReadiness whose migration wrote
	// the record, empty in a record written by an earlier winready or by
	// anyone but winready. The manager's token may create the record while
	// no WindowsReadiness exists, and a UID is not known before its object
	// is created: a record planted before the WindowsReadiness cannot name
	// it.
	WrittenFor types.UID
	// UID and Created are the ConfigMap's, set by the API server: they name
	// the one record a person acknowledged.
	UID     types.UID
	Created metav1.Time
}

// WrittenBy says whether the migration of the WindowsReadiness uid wrote
// the record itself.
func (r *Record) WrittenBy(uid types.UID) bool {
	return r != nil && uid != "" && r.WrittenFor == uid
}

// content is what the key holds: the originals, and beside them the UID of
// the WindowsReadiness that wrote them. The one key keeps the record within
// what admission lets the manager create (originals.json alone).
type content struct {
	*v1alpha1.Originals
	WrittenFor types.UID `json:"writtenFor,omitempty"`
}

// Load reads the record from namespace ns; nil when there is none. A record
// written by an earlier winready is completed from the cluster (Complete).
func Load(ctx context.Context, r client.Reader, ns string) (*Record, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: Name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the record of the originals %s/%s: %w", ns, Name, err)
	}
	c := content{Originals: &v1alpha1.Originals{}}
	if err := json.Unmarshal([]byte(cm.Data[key]), &c); err != nil {
		return nil, fmt.Errorf("decoding the record of the originals %s/%s (repair or delete it): %w", ns, Name, err)
	}
	return &Record{Originals: c.Originals, WrittenFor: c.WrittenFor, UID: cm.UID, Created: cm.CreationTimestamp},
		Complete(ctx, r, c.Originals)
}

// Save writes the record of the migration of the WindowsReadiness uid
// unless one exists, and says whether it did: the first record is the one
// that describes the cluster before any change, and it is never
// overwritten.
func Save(ctx context.Context, c client.Client, ns string, uid types.UID, o *v1alpha1.Originals) (created bool, err error) {
	data, err := json.Marshal(content{Originals: o, WrittenFor: uid})
	if err != nil {
		return false, fmt.Errorf("encoding the originals: %w", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name, Labels: map[string]string{Label: "true", calico.ClaimLabel: "true"},
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

// Delete removes the record after a finished rollback, read with r (past
// the cache: winready does not watch its own namespace), claiming it first
// when an earlier winready wrote it unclaimed: admission lets the manager
// delete only a record it claims, and only while a WindowsReadiness rolls
// back.
func Delete(ctx context.Context, r client.Reader, c client.Client, ns string) error {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: Name}, cm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := calico.Claim(ctx, c, cm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := c.Delete(ctx, cm, client.Preconditions{UID: &cm.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the record of the originals %s/%s: %w", ns, Name, err)
	}
	return nil
}

// Unclaim lifts winready's claim from the record, which stays: a person may
// delete it then, with no WindowsReadiness in the cluster.
func Unclaim(ctx context.Context, r client.Reader, c client.Client, ns string) error {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: Name}, cm); err != nil {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(calico.Unclaim(ctx, c, cm))
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

// Holds names what a record would make the rollback write back, for a
// person to judge before acknowledging a record winready did not write:
// the values an attacker would choose (a pool without encapsulation, a
// rollout of every node at once, another API server address) are named
// plainly.
func Holds(o *v1alpha1.Originals) string {
	if o == nil {
		return "nothing"
	}
	value := func(v v1alpha1.OriginalValue) string {
		if !v.Present {
			return "absent"
		}
		return v.Value
	}
	parts := []string{fmt.Sprintf("recorded at %s", o.RecordedAt.UTC().Format(time.RFC3339))}
	for _, p := range o.Pools {
		parts = append(parts, fmt.Sprintf("pool %s encapsulation %s", p.CIDR, p.Encapsulation))
	}
	parts = append(parts, "bgp "+value(o.BGP), "windowsDataplane "+value(o.WindowsDataplane))
	if o.NodeMaxUnavailable != nil {
		parts = append(parts, "calico-node maxUnavailable "+value(*o.NodeMaxUnavailable))
	}
	if o.NodeIgnored != nil && o.NodeIgnored.Present {
		parts = append(parts, "calico-node's ignore annotation "+o.NodeIgnored.Value)
	}
	endpoint := "absent"
	if o.ServicesEndpoint.Present {
		endpoint = o.ServicesEndpoint.Data[calico.ServiceHostKey] + ":" + o.ServicesEndpoint.Data[calico.ServicePortKey]
	}
	parts = append(parts, "services endpoint "+endpoint)
	if o.ServiceCIDRs.Present {
		parts = append(parts, "serviceCIDRs "+strings.Join(o.ServiceCIDRs.Values, ","))
	}
	if o.IPAMConfig.Present {
		parts = append(parts, fmt.Sprintf("strictAffinity %t", o.IPAMConfig.StrictAffinity))
	}
	return strings.Join(parts, ", ")
}

// Unknown names what a rollback needs and the originals lack, with where a
// person can supply it.
func Unknown(o *v1alpha1.Originals, ns string) []string {
	if o == nil || o.ServicesEndpoint.NodeEnv != nil {
		return nil
	}
	return []string{fmt.Sprintf("the API server address calico-node ran with before the migration: no record of it "+
		"and no kubernetes Service to derive it from; add it as \"nodeEnv\": {\"host\": ..., \"port\": ...} under "+
		"\"servicesEndpoint\" in key %s of ConfigMap %s/%s", key, ns, Name)}
}
