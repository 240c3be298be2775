package e2e

import (
	"bytes"
	"context"
	"fmt"
	"time"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/calico"
)

// servesV3 tells whether the CRDs a Tigera operator printed with
// CALICO_API_GROUP=projectcalico.org/v3 are native projectcalico.org/v3 ones
// (v1.42.0 and later) or crd.projectcalico.org/v1 ones only.
func servesV3(crds []byte) bool {
	return bytes.Contains(crds, []byte("\n  group: projectcalico.org\n"))
}

// v3APIService is the APIService through which the aggregated Calico API
// server serves projectcalico.org/v3.
const v3APIService = "v3.projectcalico.org"

// apiServerStandIn plays the aggregated Calico API server for a Tigera
// operator that knows no native projectcalico.org/v3 CRDs (before v1.42):
// projectcalico.org/v3 is served by CRDs (Calico v3.32's), and the APIServer
// "default" asks the operator to run the API server. The operator renders its
// Deployment (whose pods kwok runs, so the APIServer becomes Ready and the
// IP pool controller writes pools through projectcalico.org/v3) and the
// APIService v3.projectcalico.org, which would send the group to that
// Deployment's Service, where nothing answers: the APIService the CRDs
// registered carries the operator's ignore annotation, so the operator leaves
// it local.
//
// Unlike the real API server, the stand-in keeps two stores: what is written
// through projectcalico.org/v3 (the operator's pool updates, winready's
// IPAMConfiguration) is not seen through crd.projectcalico.org/v1, where the
// operator reads pools back and writes its FelixConfiguration.
type apiServerStandIn struct {
	// noPoolController: the operator leaves pools to calico-node.
	noPoolController bool
}

// keepAPIServiceLocal puts the ignore annotation on the APIService the
// projectcalico.org/v3 CRDs registered, before the operator starts.
func (s *apiServerStandIn) keepAPIServiceLocal(ctx context.Context, c client.Client) error {
	svc := &unstructured.Unstructured{}
	svc.SetAPIVersion("apiregistration.k8s.io/v1")
	svc.SetKind("APIService")
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, calico.IgnoreAnnotation))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		svc.SetName(v3APIService)
		err := c.Patch(ctx, svc, client.RawPatch(types.MergePatchType, patch))
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("annotating APIService %s: %w", v3APIService, err)
	}
	return nil
}

// seed asks the operator for the Calico API server. An operator before
// v1.34 has no IP pool controller: calico-node creates the Installation's
// pools at its first start (env CALICO_IPV4POOL_*, which the operator renders
// from them), and no calico-node runs on kwok's nodes, so the seed creates
// them as calico-node would.
func (s *apiServerStandIn) seed(ctx context.Context, c client.Client, pools []operatorv1.IPPool) error {
	api := &operatorv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if err := c.Create(ctx, api); err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("seeding the APIServer: %w", err)
	}
	if !s.noPoolController {
		return nil
	}
	for _, p := range pools {
		pool := &calicov3.IPPool{ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Spec: calicov3.IPPoolSpec{CIDR: p.CIDR, VXLANMode: calicov3.VXLANModeNever, IPIPMode: calicov3.IPIPModeNever,
				NATOutgoing: p.NATOutgoing == operatorv1.NATOutgoingEnabled, NodeSelector: "all()"}}
		if p.BlockSize != nil {
			pool.Spec.BlockSize = int(*p.BlockSize)
		}
		switch p.Encapsulation {
		case operatorv1.EncapsulationVXLAN:
			pool.Spec.VXLANMode = calicov3.VXLANModeAlways
		case operatorv1.EncapsulationVXLANCrossSubnet:
			pool.Spec.VXLANMode = calicov3.VXLANModeCrossSubnet
		case operatorv1.EncapsulationIPIP:
			pool.Spec.IPIPMode = calicov3.IPIPModeAlways
		case operatorv1.EncapsulationIPIPCrossSubnet:
			pool.Spec.IPIPMode = calicov3.IPIPModeCrossSubnet
		}
		if err := c.Create(ctx, pool); err != nil && !isAlreadyExists(err) {
			return fmt.Errorf("seeding IPPool %s as calico-node creates it: %w", p.Name, err)
		}
	}
	return nil
}

// hasPoolController tells whether a Tigera operator version writes IP pools
// from the Installation: its IP pool controller came with v1.34 (Calico
// v3.28); v1.33.0 has none (pkg/controller has no ippool).
func hasPoolController(operator string) bool {
	v, err := version.ParseSemantic(operator)
	return err != nil || v.AtLeast(version.MustParseSemantic("v1.34.0"))
}

// ready is the APIServer as the IP pool controller reads it: Ready lets it
// write pools through projectcalico.org/v3.
func (s *apiServerStandIn) ready(ctx context.Context, c client.Client) bool {
	api := &operatorv1.APIServer{}
	return c.Get(ctx, client.ObjectKey{Name: "default"}, api) == nil && api.Status.State == operatorv1.TigeraStatusReady
}
