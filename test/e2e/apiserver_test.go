package e2e

import (
	"bytes"
	"context"
	"fmt"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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
type apiServerStandIn struct{}

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

// seed asks the operator for the Calico API server.
func (s *apiServerStandIn) seed(ctx context.Context, c client.Client) error {
	api := &operatorv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if err := c.Create(ctx, api); err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("seeding the APIServer: %w", err)
	}
	return nil
}

// ready is the APIServer as the IP pool controller reads it: Ready lets it
// write pools through projectcalico.org/v3.
func (s *apiServerStandIn) ready(ctx context.Context, c client.Client) bool {
	api := &operatorv1.APIServer{}
	return c.Get(ctx, client.ObjectKey{Name: "default"}, api) == nil && api.Status.State == operatorv1.TigeraStatusReady
}
