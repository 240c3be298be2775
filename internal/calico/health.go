package calico

import (
	"context"
	"fmt"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Health is what a TigeraStatus says about one component.
type Health struct {
	Name string
	// Found is false when the TigeraStatus does not exist yet.
	Found       bool
	Available   bool
	Progressing bool
	Degraded    bool
	// ObservedGeneration is the lowest Installation generation its conditions
	// describe.
	ObservedGeneration int64
	// Message is the Degraded message, else the Progressing one.
	Message string
	// DegradedSince is when the Degraded condition last turned True.
	DegradedSince time.Time
	// ResourceVersion changes with every write the Tigera operator makes to
	// the TigeraStatus.
	ResourceVersion string
}

// ReadHealth reads a TigeraStatus.
func ReadHealth(ctx context.Context, r client.Reader, name string) (Health, error) {
	ts := &operatorv1.TigeraStatus{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, ts); err != nil {
		if apierrors.IsNotFound(err) {
			return Health{Name: name}, nil
		}
		return Health{Name: name}, fmt.Errorf("reading tigerastatus %s: %w", name, err)
	}
	return HealthOf(ts), nil
}

// HealthOf summarises a TigeraStatus.
func HealthOf(ts *operatorv1.TigeraStatus) Health {
	h := Health{Name: ts.Name, Found: true, ResourceVersion: ts.ResourceVersion}
	first := true
	var progressing string
	for _, c := range ts.Status.Conditions {
		on := c.Status == operatorv1.ConditionTrue
		switch c.Type {
		case operatorv1.ComponentAvailable:
			h.Available = on
		case operatorv1.ComponentProgressing:
			h.Progressing = on
			if on {
				progressing = c.Message
			}
		case operatorv1.ComponentDegraded:
			h.Degraded = on
			if on {
				h.Message = c.Message
				h.DegradedSince = c.LastTransitionTime.Time
			}
		default:
			continue
		}
		if first || c.ObservedGeneration < h.ObservedGeneration {
			h.ObservedGeneration = c.ObservedGeneration
			first = false
		}
	}
	if h.Message == "" {
		h.Message = progressing
	}
	return h
}

// SettledAt reports whether the component is Available, not Progressing and
// not Degraded at Installation generation gen or later. When it is not, the
// string says what is awaited. Conditions from an older generation describe
// the Installation before the last patch and are not trusted.
func (h Health) SettledAt(gen int64) (bool, string) {
	switch {
	case !h.Found:
		return false, fmt.Sprintf("TigeraStatus %s to appear", h.Name)
	case h.ObservedGeneration < gen:
		return false, fmt.Sprintf("TigeraStatus %s to observe Installation generation %d (at %d)", h.Name, gen, h.ObservedGeneration)
	case h.Degraded:
		return false, fmt.Sprintf("TigeraStatus %s to recover from Degraded: %s", h.Name, h.Message)
	case h.Progressing || !h.Available:
		msg := fmt.Sprintf("TigeraStatus %s to become Available", h.Name)
		if h.Message != "" {
			msg += ": " + h.Message
		}
		return false, msg
	}
	return true, ""
}

// ReadDaemonSet reads a DaemonSet in calico-system; nil when absent.
func ReadDaemonSet(ctx context.Context, r client.Reader, name string) (*appsv1.DaemonSet, error) {
	return getOrNil(ctx, r, client.ObjectKey{Namespace: SystemNamespace, Name: name}, &appsv1.DaemonSet{})
}

// RolloutDone reports whether every pod of the DaemonSet runs its current
// template; when not, the string says how far the rollout is.
func RolloutDone(ds *appsv1.DaemonSet) (bool, string) {
	st := ds.Status
	if st.ObservedGeneration < ds.Generation {
		return false, fmt.Sprintf("%s rollout to start (generation %d not yet observed)", ds.Name, ds.Generation)
	}
	if st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
		st.NumberAvailable == st.DesiredNumberScheduled && st.NumberUnavailable == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("%s rollout (%d of %d updated, %d available)",
		ds.Name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberAvailable)
}

// ContainerEnv returns the value of env name in container of the template,
// and whether it is set.
func ContainerEnv(ds *appsv1.DaemonSet, container, name string) (string, bool) {
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != container {
			continue
		}
		return envValue(c.Env, name)
	}
	return "", false
}

func envValue(env []corev1.EnvVar, name string) (string, bool) {
	for _, e := range env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}
