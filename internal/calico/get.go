package calico

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// getOrNil reads the object at key into obj; nil, nil when it does not
// exist, which for every object winready reads is a state, not an error.
func getOrNil[T client.Object](ctx context.Context, r client.Reader, key client.ObjectKey, obj T) (T, error) {
	var none T
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		kind := strings.ToLower(strings.TrimPrefix(fmt.Sprintf("%T", obj), "*"))
		if i := strings.LastIndex(kind, "."); i >= 0 {
			kind = kind[i+1:]
		}
		return none, fmt.Errorf("reading %s %s: %w", kind, strings.TrimPrefix(key.String(), "/"), err)
	}
	return obj, nil
}
