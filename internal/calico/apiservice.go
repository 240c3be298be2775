package calico

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// APIServiceName is the APIService through which the aggregated Calico API
// server serves projectcalico.org/v3.
const APIServiceName = "v3.projectcalico.org"

// APIServiceUnavailable reads the Calico APIService and, when its Available
// condition is not True, returns why in its own words; "" when it is
// available, local (native v3 CRDs) or absent.
func APIServiceUnavailable(ctx context.Context, r client.Reader) (string, error) {
	svc := &unstructured.Unstructured{}
	svc.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"})
	if err := r.Get(ctx, client.ObjectKey{Name: APIServiceName}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading apiservice %s: %w", APIServiceName, err)
	}
	conds, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Available" {
			continue
		}
		if m["status"] == "True" {
			return "", nil
		}
		return fmt.Sprintf("APIService %s is not Available (%v: %v)", APIServiceName, m["reason"], m["message"]), nil
	}
	return "", nil
}
