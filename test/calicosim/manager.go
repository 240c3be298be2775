package calicosim

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager returns a manager of its own that runs the simulated Tigera
// operator and DaemonSet controller with opts, and simulated probe agents
// and pod network check pods for rounds in probeNamespace (sim.PodChecks
// breaks their dataplane), under that namespace's quota, which it keeps as
// the resource quota controller does. Start it beside the code under test.
func NewManager(cfg *rest.Config, scheme *runtime.Scheme, opts Options, probeNamespace string) (ctrl.Manager, *Simulator, *ProbeAgents, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, nil, nil, err
	}
	sim := New(opts)
	if err := sim.SetupWithManager(mgr); err != nil {
		return nil, nil, nil, err
	}
	agents := NewProbeAgents(probeNamespace)
	if err := agents.SetupWithManager(mgr); err != nil {
		return nil, nil, nil, err
	}
	sim.podChecks = NewPodChecks(probeNamespace)
	if err := sim.podChecks.SetupWithManager(mgr); err != nil {
		return nil, nil, nil, err
	}
	if err := NewResourceQuotas(probeNamespace).SetupWithManager(mgr); err != nil {
		return nil, nil, nil, err
	}
	return mgr, sim, agents, nil
}
