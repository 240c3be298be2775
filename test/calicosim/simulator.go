// Package calicosim plays the Tigera operator (v1.43.0, Calico v3.32) and the DaemonSet controller on an envtest
// control plane, where nothing else runs. It follows the operator's observable behaviour (defaulting, validation,
// IP pool reconciliation, rendering of calico-node and calico-node-windows, TigeraStatus conditions) closely
// enough that code tested against it can run unchanged against the real operator, and no further.
//
// Everything is built from controller-runtime reconcilers with watches; waits are RequeueAfter, never sleeps.
// Reads go through the manager's cache, as the operator's do: a read may lag a write, and every write that depends on
// one is an update checked against its resourceVersion (a conflict requeues) or a patch of the fields it sets.
package calicosim

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// CalicoAPIMode says how projectcalico.org/v3 is served, which decides whether the IP pool controller may modify
// existing pools.
type CalicoAPIMode string

const (
	// NativeV3 means the projectcalico.org/v3 CRDs are installed natively: pool changes are allowed.
	NativeV3 CalicoAPIMode = "NativeV3"
	// APIServerUnavailable means the v3 API is served by a Calico API server that is not ready: the operator
	// creates pools only to bootstrap an empty cluster and refuses every later change.
	APIServerUnavailable CalicoAPIMode = "APIServerUnavailable"
)

// Options tunes the simulator. Zero values take the defaults; a negative duration means "no delay at all".
type Options struct {
	// RolloutStep is how long each node takes during a DaemonSet rollout (default 20ms).
	RolloutStep time.Duration
	// StatusLag is how long a change waits before a TigeraStatus shows it (default 10ms; the real operator's
	// status managers tick every 5s).
	StatusLag time.Duration
	// CalicoAPI is how projectcalico.org/v3 is served (default NativeV3).
	CalicoAPI CalicoAPIMode
	// DaemonSetNamespaces are the namespaces whose DaemonSets the simulated DaemonSet controller rolls out
	// (default: calico-system only).
	DaemonSetNamespaces []string
	// Clock paces the rollouts and the status lag (default the real clock). Inline steps a fake one.
	Clock clock.PassiveClock
}

const (
	defaultRolloutStep = 20 * time.Millisecond
	defaultStatusLag   = 10 * time.Millisecond
	// conflictRetry is how soon a reconcile that lost an optimistic-lock race runs again.
	conflictRetry = 5 * time.Millisecond
)

// Simulator is the simulated Tigera operator plus DaemonSet controller. Create it with New and register it on a
// manager of its own with SetupWithManager.
type Simulator struct {
	opts Options

	// Set by SetupWithManager.
	client client.Client // writes
	reader client.Reader // reads through the cache

	mu    sync.Mutex
	fault string
	held  bool
	// step overrides Options.RolloutStep when set (SetRolloutStep).
	step      time.Duration
	calicoAPI CalicoAPIMode
	// version is the Calico version the operator reports (SetCalicoVersion).
	version string
	writes  map[string]int
	memory  endpointMemory
	// rolloutStats counts the DaemonSet controller's rollouts (Rollouts).
	rolloutStats rolloutCounter
	// windowsNodes chooses how each Windows node's join goes (SetWindowsNode).
	windowsNodes map[string]WindowsNodeBehaviour
	// withheld are the nodes Felix leaves without a tunnel address (WithholdTunnel).
	withheld map[string]bool
	// podChecks plays the pod network check pods, when NewManager started them.
	podChecks *PodChecks
	// interrupt stops the next core reconcile between its reads (InterruptRender).
	interrupt *Interrupt

	// Pokes wake controllers for changes that are not Kubernetes objects (fault injection, API mode).
	corePokes        chan event.GenericEvent
	poolPokes        chan event.GenericEvent
	windowsPokes     chan event.GenericEvent
	windowsNodePokes chan event.GenericEvent
	felixPokes       chan event.GenericEvent
}

// New returns a simulator with opts, defaults filled in.
func New(opts Options) *Simulator {
	if opts.RolloutStep == 0 {
		opts.RolloutStep = defaultRolloutStep
	}
	if opts.StatusLag == 0 {
		opts.StatusLag = defaultStatusLag
	}
	if opts.CalicoAPI == "" {
		opts.CalicoAPI = NativeV3
	}
	if len(opts.DaemonSetNamespaces) == 0 {
		opts.DaemonSetNamespaces = []string{calicoNamespace}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Simulator{
		opts:         opts,
		calicoAPI:    opts.CalicoAPI,
		version:      calicoVersion,
		writes:       map[string]int{},
		corePokes:    make(chan event.GenericEvent, 1),
		poolPokes:    make(chan event.GenericEvent, 1),
		windowsPokes: make(chan event.GenericEvent, 1),

		windowsNodePokes: make(chan event.GenericEvent, 1),
		felixPokes:       make(chan event.GenericEvent, 1),
	}
}

// SetupWithManager registers the simulator's controllers on mgr: the core Installation controller (TigeraStatus
// calico), the IP pool controller (ippools, apiserver), the Windows controller (calico-windows) and the DaemonSet
// controller. Give the simulator a manager of its own, separate from the one of the code under test.
func (s *Simulator) SetupWithManager(mgr ctrl.Manager) error {
	s.client = mgr.GetClient()
	s.reader = newCachedReader(mgr)
	for _, setup := range []func(ctrl.Manager) error{
		(&coreController{sim: s, status: newStatusManager(StatusCalico)}).setup,
		(&poolController{sim: s, status: newStatusManager(StatusIPPools), apiserver: newStatusManager(StatusAPIServer)}).setup,
		(&windowsController{sim: s, status: newStatusManager(StatusCalicoWindows)}).setup,
		(&rolloutController{sim: s, lastStep: map[types.UID]rolloutClock{}}).setup,
		(&windowsNodeAgent{sim: s}).setup,
		(&felix{sim: s}).setup,
	} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	return nil
}

// InjectFault makes TigeraStatus calico Degraded (reason PodFailure, this message), as a crash-looping
// calico-node pod would, until ClearFault.
func (s *Simulator) InjectFault(message string) {
	s.mu.Lock()
	s.fault = message
	s.mu.Unlock()
	poke(s.corePokes)
}

// Interrupt is a core reconcile stopped between its read of the Installation and its read of the
// services-endpoint ConfigMap (InterruptRender).
type Interrupt struct {
	// Stopped is closed once a reconcile has read the Installation and stopped.
	Stopped chan struct{}
	resume  chan struct{}
	once    sync.Once
	sim     *Simulator
}

// Resume lets the stopped reconcile read the ConfigMap and render, or the next one go on undisturbed when
// none has stopped yet. It may be called more than once.
func (i *Interrupt) Resume() {
	i.once.Do(func() {
		i.sim.mu.Lock()
		if i.sim.interrupt == i {
			i.sim.interrupt = nil
		}
		i.sim.mu.Unlock()
		close(i.resume)
	})
}

// InterruptRender stops the next core reconcile after it has read the Installation, until Resume: the real
// operator's reconcile takes long enough for writes to land between its first read and its render, which a
// simulated one, taking milliseconds, hardly ever lets happen by itself. It starts that reconcile at once.
func (s *Simulator) InterruptRender() *Interrupt {
	i := &Interrupt{Stopped: make(chan struct{}), resume: make(chan struct{}), sim: s}
	s.mu.Lock()
	s.interrupt = i
	s.mu.Unlock()
	poke(s.corePokes)
	return i
}

// interrupted stops the calling reconcile when InterruptRender asked for it.
func (s *Simulator) interrupted(ctx context.Context) {
	s.mu.Lock()
	i := s.interrupt
	s.interrupt = nil
	s.mu.Unlock()
	if i == nil {
		return
	}
	close(i.Stopped)
	select {
	case <-i.resume:
	case <-ctx.Done():
	}
}

// ResetRolloutStats starts the counts Rollouts returns afresh.
func (s *Simulator) ResetRolloutStats() {
	s.rolloutStats.mu.Lock()
	defer s.rolloutStats.mu.Unlock()
	s.rolloutStats.stats = nil
}

// HoldRollouts stops every DaemonSet rollout where it stands, as a node whose
// new pod never becomes ready would, until ReleaseRollouts.
func (s *Simulator) HoldRollouts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
}

// ReleaseRollouts lets held rollouts go on.
func (s *Simulator) ReleaseRollouts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = false
}

// SetRolloutStep changes how long each node takes in a DaemonSet rollout
// from the next pod on (0 is the Options' value again), as nodes whose
// calico-node starts slowly would: a test that acts in the middle of a
// rollout slows it down.
func (s *Simulator) SetRolloutStep(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step = d
}

func (s *Simulator) rolloutStep() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.step > 0 {
		return s.step
	}
	return s.opts.RolloutStep
}

func (s *Simulator) rolloutsHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// ClearFault ends what InjectFault started.
func (s *Simulator) ClearFault() { s.InjectFault("") }

// SetCalicoAPI switches how projectcalico.org/v3 is served, e.g. to let a test bring the Calico API server up.
func (s *Simulator) SetCalicoAPI(mode CalicoAPIMode) {
	s.mu.Lock()
	s.calicoAPI = mode
	s.mu.Unlock()
	poke(s.poolPokes)
}

// SetCalicoVersion makes the operator report Calico v (status.calicoVersion,
// the ImageSet it looks for) from its next reconcile on, as an operator of
// another release would: the preflight's CalicoVersion check reads it.
// SetCalicoVersion("") is the simulated release's own, v3.32.0.
func (s *Simulator) SetCalicoVersion(v string) {
	if v == "" {
		v = calicoVersion
	}
	s.mu.Lock()
	s.version = v
	s.mu.Unlock()
	poke(s.corePokes)
}

// calicoVersionNow is the Calico version the operator reports.
func (s *Simulator) calicoVersionNow() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Writes returns how many writes the simulator made, keyed "<Kind> <verb>" (e.g. "DaemonSet update",
// "TigeraStatus status", "Installation patch"). Failed writes are not counted.
func (s *Simulator) Writes() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.writes))
	for k, v := range s.writes {
		out[k] = v
	}
	return out
}

func (s *Simulator) currentFault() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fault
}

func (s *Simulator) apiAvailable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calicoAPI != APIServerUnavailable
}

// poke wakes a controller; one pending poke is enough, so a full channel drops the new one.
func poke(ch chan event.GenericEvent) {
	select {
	case ch <- event.GenericEvent{Object: &operatorv1.Installation{}}:
	default:
	}
}

// errInstallationGone stops a controller from creating objects once the Installation is deleted, so that Clean
// is not undone by a reconcile that started before the deletion.
var errInstallationGone = errors.New("installation is gone")

// installation reads Installation "default"; nil without error when it does not exist.
func (s *Simulator) installation(ctx context.Context) (*operatorv1.Installation, error) {
	inst := &operatorv1.Installation{}
	if err := s.reader.Get(ctx, types.NamespacedName{Name: installationName}, inst); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return inst, nil
}

func (s *Simulator) count(obj client.Object, verb string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes[reflect.TypeOf(obj).Elem().Name()+" "+verb]++
}

func (s *Simulator) create(ctx context.Context, obj client.Object) error {
	inst, err := s.installation(ctx)
	if err != nil {
		return err
	}
	if inst == nil || inst.DeletionTimestamp != nil {
		return errInstallationGone
	}
	if err := s.client.Create(ctx, obj); err != nil {
		return err
	}
	s.count(obj, "create")
	return nil
}

func (s *Simulator) update(ctx context.Context, obj client.Object) error {
	if err := s.client.Update(ctx, obj); err != nil {
		return err
	}
	s.count(obj, "update")
	return nil
}

func (s *Simulator) updateStatus(ctx context.Context, obj client.Object) error {
	if err := s.client.Status().Update(ctx, obj); err != nil {
		return err
	}
	s.count(obj, "status")
	return nil
}

func (s *Simulator) patch(ctx context.Context, obj client.Object, p client.Patch) error {
	if err := s.client.Patch(ctx, obj, p); err != nil {
		return err
	}
	s.count(obj, "patch")
	return nil
}

func (s *Simulator) delete(ctx context.Context, obj client.Object) error {
	if err := s.client.Delete(ctx, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	s.count(obj, "delete")
	return nil
}

// finish turns a reconcile's outcome into a controller-runtime result: the shortest requested wait wins, a lost
// optimistic-lock race is retried soon rather than reported, and a vanished Installation ends the work.
func finish(err error, waits ...time.Duration) (ctrl.Result, error) {
	switch {
	case err == nil:
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		waits = append(waits, conflictRetry)
	case errors.Is(err, errInstallationGone), apierrors.IsNotFound(err), errors.Is(err, context.Canceled):
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, err
	}
	var soonest time.Duration
	for _, w := range waits {
		if w > 0 && (soonest == 0 || w < soonest) {
			soonest = w
		}
	}
	return ctrl.Result{RequeueAfter: soonest}, nil
}

// endpointMemory is the operator's process-wide k8sapi.Endpoint: it starts as the pod's environment, takes the
// services-endpoint ConfigMap's values whenever a controller reads the ConfigMap (PopulateK8sServiceEndPoint),
// and keeps them when the ConfigMap is deleted, until the operator restarts.
type endpointMemory struct {
	// process identifies the operator process the memory belongs to: a new Installation (after Clean and Seed)
	// or RestartOperator starts a new one.
	process types.UID
	ep      serviceEndpoint
}

// RestartOperator models a restart of the operator's pod: the API server address it remembers is read again
// from its environment (the kubernetes Service, overridden by the ConfigMap through envFrom).
func (s *Simulator) RestartOperator() {
	s.mu.Lock()
	s.memory = endpointMemory{}
	s.mu.Unlock()
	poke(s.corePokes)
	poke(s.windowsPokes)
}

// populateEndpoint is the operator's PopulateK8sServiceEndPoint on top of its memory: it returns the address the
// operator holds after reading cm (nil when the ConfigMap does not exist).
func (s *Simulator) populateEndpoint(ctx context.Context, inst *operatorv1.Installation, cm *corev1.ConfigMap) (serviceEndpoint, error) {
	ep, err := s.rememberedEndpoint(ctx, inst, cm)
	if err != nil {
		return serviceEndpoint{}, err
	}
	if cm != nil {
		ep = endpointFrom(cm)
		s.mu.Lock()
		s.memory.ep = ep
		s.mu.Unlock()
	}
	return ep, nil
}

// rememberedEndpoint is the address the operator holds before this reconcile reads the ConfigMap; a new process
// starts from its pod environment.
func (s *Simulator) rememberedEndpoint(ctx context.Context, inst *operatorv1.Installation, cm *corev1.ConfigMap) (serviceEndpoint, error) {
	s.mu.Lock()
	mem := s.memory
	s.mu.Unlock()
	if mem.process == inst.UID && mem.process != "" {
		return mem.ep, nil
	}
	ep, err := podEnvironment(ctx, s.reader, cm)
	if err != nil {
		return serviceEndpoint{}, err
	}
	s.mu.Lock()
	s.memory = endpointMemory{process: inst.UID, ep: ep}
	s.mu.Unlock()
	return ep, nil
}

// PodChecks is the pod network check pods NewManager started beside the
// simulator, nil otherwise.
func (s *Simulator) PodChecks() *PodChecks { return s.podChecks }
