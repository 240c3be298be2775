package preflight

import (
	"context"
	"fmt"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Discovery is the part of the discovery client the checks need.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// CalicoAPIServed reports whether projectcalico.org/v3 serves the resources a
// migration reads and writes.
func CalicoAPIServed(d Discovery) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(calicov3.SchemeGroupVersion.String())
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("discovering %s: %w", calicov3.SchemeGroupVersion, err)
	}
	need := map[string]bool{"ippools": false, "ipamconfigurations": false}
	for _, r := range list.APIResources {
		if _, ok := need[r.Name]; ok {
			need[r.Name] = true
		}
	}
	return need["ippools"] && need["ipamconfigurations"], nil
}

// Gather reads what the checks look at. r should read from the API server:
// these objects are read once per preflight and not worth caching.
func Gather(ctx context.Context, r client.Reader, d Discovery, inst *operatorv1.Installation) (Inputs, error) {
	in := Inputs{Installation: inst}
	served, err := CalicoAPIServed(d)
	if err != nil {
		return in, err
	}
	in.CalicoAPIServed = served
	if err := getOptional(ctx, r, client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, &corev1.Service{}, &in.KubeDNS); err != nil {
		return in, err
	}
	if !served {
		return in, nil
	}
	felix := &calicov3.FelixConfiguration{}
	var found bool
	if err := getOptional(ctx, r, client.ObjectKey{Name: "default"}, felix, &found); err != nil {
		return in, err
	}
	if found {
		in.Felix = felix
	}
	bgp := &calicov3.BGPConfiguration{}
	if err := getOptional(ctx, r, client.ObjectKey{Name: "default"}, bgp, &found); err != nil {
		return in, err
	}
	if found {
		in.BGPConfig = bgp
	}
	peers := &calicov3.BGPPeerList{}
	if err := r.List(ctx, peers); err != nil {
		return in, fmt.Errorf("listing bgppeers: %w", err)
	}
	for _, p := range peers.Items {
		in.BGPPeers = append(in.BGPPeers, p.Name)
	}
	return in, nil
}

func getOptional(ctx context.Context, r client.Reader, key client.ObjectKey, obj client.Object, found *bool) error {
	err := r.Get(ctx, key, obj)
	*found = err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return nil
}
