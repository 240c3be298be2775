package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
)

// realBackend runs the real Tigera operator (E2E_OPERATOR_VERSION, v1.43.0
// unless set) against the envtest control plane, with kube-controller-manager
// and kube-scheduler so that DaemonSets get pods, and kwok so that those pods
// run on fake nodes. The binaries come from hack/e2e-binaries.sh.
type realBackend struct {
	scheme *runtime.Scheme
	logDir string
	env    *kit.Env
	// apiServer is set when the operator predates projectcalico.org/v3 CRDs:
	// the Calico API server is played (apiserver_test.go).
	apiServer *apiServerStandIn

	mu       sync.Mutex
	procs    []*process
	stopping bool
}

func binPath(elem ...string) string {
	return filepath.Join(append([]string{repoRoot, "bin"}, elem...)...)
}

// newestOperator is the Tigera operator the whole suite runs against unless
// E2E_OPERATOR_VERSION names another.
const newestOperator = "v1.43.0"

// operatorVersion is the Tigera operator version under test: make e2e runs
// the suite once per version of E2E_OPERATORS.
func operatorVersion() string {
	if v := os.Getenv("E2E_OPERATOR_VERSION"); v != "" {
		return v
	}
	return newestOperator
}

// operatorBin is where hack/e2e-binaries.sh puts that version.
func operatorBin() string { return binPath("e2e", operatorVersion(), "tigera-operator") }

// realBinaries are the programs the real backend runs, and what builds them:
// a missing one fails the suite before any spec, by name, rather than a spec
// midway with a shell's "No such file".
var realBinaries = []struct{ path, target string }{
	{operatorBin(), "make e2e-binaries E2E_OPERATORS=" + operatorVersion()},
	{binPath("e2e", "kwok"), "make e2e-binaries"},
	{binPath("k8s", "1.37.2", "kube-controller-manager"), "make e2e-binaries"},
	{binPath("k8s", "1.37.2", "kube-scheduler"), "make e2e-binaries"},
	// The timing scenario's manual runbook.
	{binPath("k8s", "1.37.2", "kubectl"), "make bin/k8s/1.37.2/kubectl"},
}

func (b *realBackend) Start(ctx context.Context) (*rest.Config, error) {
	for _, bin := range realBinaries {
		if _, err := os.Stat(bin.path); err != nil {
			return nil, fmt.Errorf("%s is missing (%s builds it; make e2e runs it): %w", bin.path, bin.target, err)
		}
	}
	// The native projectcalico.org/v3 CRDs, as the operator prints them.
	crds := filepath.Join(b.logDir, "calico-crds")
	if err := os.MkdirAll(crds, 0o755); err != nil {
		return nil, err
	}
	printCRDs := exec.Command(operatorBin(), "--print-calico-crds", "all")
	printCRDs.Env = append(os.Environ(), "CALICO_API_GROUP=projectcalico.org/v3")
	out, err := printCRDs.Output()
	if err != nil {
		return nil, fmt.Errorf("printing Calico's CRDs (run make e2e-binaries): %w", err)
	}
	if err := os.WriteFile(filepath.Join(crds, "calico.yaml"), out, 0o600); err != nil {
		return nil, err
	}
	// The operator prints its own operator.tigera.io CRDs too (Calico's, not
	// Enterprise's): the environment takes none of kit's Calico CRDs.
	crdPaths := []string{crds}
	if !servesV3(out) {
		// Before v1.42 the operator knows crd.projectcalico.org/v1 CRDs only,
		// and projectcalico.org/v3 is the Calico API server's.
		b.apiServer = &apiServerStandIn{noPoolController: !hasPoolController(operatorVersion())}
		crdPaths = append(crdPaths, filepath.Join(repoRoot, "bin", "crds", "calico"))
	}
	if b.env, err = kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs, CRDDirectories: crdPaths}); err != nil {
		return nil, err
	}
	if err := b.auditWrites(); err != nil {
		return nil, err
	}
	cfg, err := b.env.Start()
	if err != nil {
		return nil, err
	}
	admin, err := b.env.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return nil, err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(b.logDir, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: b.scheme})
	if err != nil {
		return nil, err
	}
	// kwok's node heartbeats renew Leases in kube-node-lease: without them
	// node lifecycle marks the nodes NotReady, and their pods unready.
	for _, ns := range []string{calico.OperatorNamespace, "kube-node-lease"} {
		if err := ensureNamespace(ctx, c, ns); err != nil {
			return nil, err
		}
	}
	if b.apiServer != nil {
		if err := b.apiServer.keepAPIServiceLocal(ctx, c); err != nil {
			return nil, err
		}
	}
	k8sBin := binPath("k8s", "1.37.2")
	stages, err := kwokStages(filepath.Join(b.logDir, "kwok-stages"))
	if err != nil {
		return nil, err
	}
	kwokArgs := []string{"--kubeconfig", kubeconfig, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake", "--node-port=0", "--server-address=",
		// The node-heartbeat-with-lease stage renews Leases only with a lease duration.
		"--node-lease-duration-seconds=40"}
	kwokArgs = append(kwokArgs, "--config", strings.Join(stages, ","))
	// The operator runs with a pod's environment: KUBERNETES_SERVICE_HOST/PORT
	// are the kubernetes Service's, put over by the services-endpoint
	// ConfigMap at each start (the Deployment's optional envFrom). It reaches
	// the API server through its kubeconfig.
	operatorEnv, err := podEnvironment(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		name string
		env  func() []string
		bin  string
		args []string
	}{
		{"kube-controller-manager", noEnv, filepath.Join(k8sBin, "kube-controller-manager"), []string{"--kubeconfig", kubeconfig,
			"--controllers=*,-serviceaccount-token", "--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false"}},
		{"kube-scheduler", noEnv, filepath.Join(k8sBin, "kube-scheduler"), []string{"--kubeconfig", kubeconfig,
			"--leader-elect=false", "--secure-port=0"}},
		{"kwok", noEnv, binPath("e2e", "kwok"), kwokArgs},
		{"tigera-operator", func() []string {
			return append(operatorEnv(), "OPERATOR_NAMESPACE="+calico.OperatorNamespace, "KUBECONFIG="+kubeconfig,
				"CALICO_API_GROUP=projectcalico.org/v3")
		}, operatorBin(), []string{"--enable-leader-election=false"}},
	} {
		if err := b.supervise(p.name, p.env, p.bin, p.args...); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// auditPolicy records every write but Leases (kwok's node heartbeats, leader
// elections) and Events, with when it was received and when it completed:
// the timing scenario reads from it how soon winready acts on what it
// waited for.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  resources:
  - group: coordination.k8s.io
  - group: ""
    resources: ["events"]
  - group: events.k8s.io
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
- level: None
`

// auditLog is the API server's audit log of writes.
func (b *realBackend) auditLog() string { return filepath.Join(b.logDir, "audit.log") }

func (b *realBackend) auditWrites() error {
	policy := filepath.Join(b.logDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	args := b.env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", b.auditLog())
	args.Set("audit-log-mode", "blocking")
	return nil
}

// restartOperator stops the Tigera operator as deleting its pod would;
// supervise starts it again with the environment it reads then.
func (b *realBackend) restartOperator() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.procs) - 1; i >= 0; i-- {
		if p := b.procs[i]; strings.HasPrefix(p.name, "tigera-operator") {
			return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	return errors.New("no tigera-operator process")
}

// supervise runs a binary and starts it again when it exits, as a
// Deployment would; env is read at every start.
func (b *realBackend) supervise(name string, env func() []string, bin string, args ...string) error {
	p, err := startProcess(name, b.logDir, env(), bin, args...)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.procs = append(b.procs, p)
	b.mu.Unlock()
	go func() {
		for restart := 1; ; restart++ {
			_ = p.cmd.Wait()
			b.mu.Lock()
			stopping := b.stopping
			b.mu.Unlock()
			if stopping {
				return
			}
			time.Sleep(time.Second) // a crash-loop back-off, outside any test
			next, err := startProcess(fmt.Sprintf("%s-%d", name, restart), b.logDir, env(), bin, args...)
			if err != nil {
				return
			}
			b.mu.Lock()
			b.procs = append(b.procs, next)
			b.mu.Unlock()
			p = next
		}
	}()
	return nil
}

// vxlanPool is the first IPv4 pool with VXLAN on, the zero Prefix when none.
func vxlanPool(pools []operatorv1.IPPool) netip.Prefix {
	for _, p := range pools {
		prefix, err := netip.ParsePrefix(p.CIDR)
		if err == nil && prefix.Addr().Is4() && (p.Encapsulation == operatorv1.EncapsulationVXLAN ||
			p.Encapsulation == operatorv1.EncapsulationVXLANCrossSubnet) {
			return prefix.Masked()
		}
	}
	return netip.Prefix{}
}

// Seed creates what a platform team has before winready: nodes (played by
// kwok), the Installation, the IPAM configuration, kubeadm's ConfigMap and
// kube-dns; the real operator does the rest.
func (b *realBackend) Seed(ctx context.Context, c client.Client, cl calicosim.Cluster) error {
	vxlan := vxlanPool(cl.Pools)
	for i, n := range cl.Nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name,
			Labels:      map[string]string{calico.OSLabel: "linux", "kubernetes.io/hostname": n.Name},
			Annotations: map[string]string{kwokAnnotation: "fake"}}}
		if vxlan.IsValid() {
			// No calico-node runs on kwok nodes: the seed writes the tunnel
			// address Felix writes on a node once a pool has VXLAN on.
			node.Annotations[calico.TunnelAnnotation] = netip.AddrFrom4([4]byte{
				vxlan.Addr().As4()[0], vxlan.Addr().As4()[1], byte(i), 1}).String()
		}
		if err := c.Create(ctx, node); err != nil {
			return err
		}
		// kwok writes the node's status too: patch only the addresses, both
		// kinds its node-initialize stage looks for. Given one without the
		// other, it writes the list again with the missing one alone, and
		// the InternalIP the rounds pair nodes by would be lost.
		base := node.DeepCopy()
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.InternalIP},
			{Type: corev1.NodeHostName, Address: n.Name}}
		if err := c.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
			return err
		}
	}
	// The same kubeadm-config the simulator seeds: the Tigera operator reads
	// its podSubnet.
	kubeadm := calicosim.KubeadmConfigMap(cl.KubeadmConfig, cl.Pools)
	dns := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
	ipam := &calicov3.IPAMConfiguration{ObjectMeta: metav1.ObjectMeta{Name: calico.IPAMConfigName},
		Spec: calicov3.IPAMConfigurationSpec{StrictAffinity: *cl.StrictAffinity, AutoAllocateBlocks: true}}
	// The spec as the user wrote it, the one the simulator defaults for its seed.
	inst := &operatorv1.Installation{ObjectMeta: metav1.ObjectMeta{Name: calico.InstallationName},
		Spec: *calicosim.InstallationSpec(cl)}
	for _, obj := range []client.Object{kubeadm, dns, ipam, inst} {
		if err := c.Create(ctx, obj); err != nil && !isAlreadyExists(err) {
			return fmt.Errorf("seeding %T: %w", obj, err)
		}
	}
	if b.apiServer != nil {
		if err := b.apiServer.seed(ctx, c, cl.Pools); err != nil {
			return err
		}
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		addressed, err := keepAddresses(ctx, c, cl)
		if err != nil {
			return false, err
		}
		return addressed && healthy() == nil && hasStatus(ctx, c, calico.StatusCalico) && b.poolsServed(ctx, c, cl.Pools), nil
	})
}

// keepAddresses says whether every seeded node kwok has initialized (Ready)
// shows its InternalIP, and writes it again on one that lost it: kwok's
// heartbeat writes back the addresses it read, and one that read the node
// before the seed's patch takes the InternalIP away again. The rounds pair
// nodes by it.
func keepAddresses(ctx context.Context, c client.Client, cl calicosim.Cluster) (bool, error) {
	all := true
	for _, n := range cl.Nodes {
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			return false, err
		}
		ready := slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		has := slices.ContainsFunc(node.Status.Addresses, func(a corev1.NodeAddress) bool {
			return a.Type == corev1.NodeInternalIP && a.Address == n.InternalIP
		})
		if ready && has {
			continue
		}
		all = false
		if !has {
			base := node.DeepCopy()
			node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.InternalIP},
				{Type: corev1.NodeHostName, Address: n.Name}}
			if err := c.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
				return false, err
			}
		}
	}
	return all, nil
}

// poolsServed tells whether every pool of the Installation is served through
// projectcalico.org/v3: an operator before v1.42 creates the first pools
// through crd.projectcalico.org/v1 and writes them through
// projectcalico.org/v3 only once the Calico API server is Ready.
func (b *realBackend) poolsServed(ctx context.Context, c client.Client, pools []operatorv1.IPPool) bool {
	if b.apiServer == nil {
		return true
	}
	if !b.apiServer.ready(ctx, c) {
		return false
	}
	for _, p := range pools {
		if c.Get(ctx, client.ObjectKey{Name: p.Name}, &calicov3.IPPool{}) != nil {
			return false
		}
	}
	return true
}

func hasStatus(ctx context.Context, c client.Client, name string) bool {
	return c.Get(ctx, client.ObjectKey{Name: name}, &operatorv1.TigeraStatus{}) == nil
}

// Clean removes the nodes; the control plane goes with Stop.
func (b *realBackend) Clean(ctx context.Context, c client.Client) error {
	return removeNodes(ctx, c, "linux-0", "linux-1", "linux-2", "win-1")
}

// removeNodes deletes the nodes and then their pods at once. With no kubelet
// (kwok manages only nodes that exist) a pod of a deleted node stays
// Terminating until the pod garbage collector's 40 s quarantine ends; the
// DaemonSet controller, which deletes such pods, waits for each deletion to
// complete and meanwhile rolls calico-node out no further: the next
// scenario's rollout would stall for as long.
func removeNodes(ctx context.Context, c client.Client, names ...string) error {
	var errs []error
	for _, n := range names {
		errs = append(errs, client.IgnoreNotFound(c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})))
	}
	for _, n := range names {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.MatchingFields{"spec.nodeName": n}); err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range pods.Items {
			errs = append(errs, client.IgnoreNotFound(c.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))))
		}
	}
	return errors.Join(errs...)
}

// Replacements counts, per node, the calico-node pods created after the
// call: each is the replacement of the pod the DaemonSet controller deleted
// there (the nodes stay; no pod is created for a new node). A watch from the
// list's resourceVersion misses none.
// The watch is a long-running request: stop it, or the API server waits for
// it when it shuts down.
func (b *realBackend) Replacements(ctx context.Context, c client.Client) (func() map[string]int, func(), error) {
	pods := &corev1.PodList{}
	selector := client.MatchingLabels{"k8s-app": calico.NodeDaemonSet}
	if err := c.List(ctx, pods, client.InNamespace(calico.SystemNamespace), selector); err != nil {
		return nil, nil, err
	}
	seen := map[types.UID]bool{}
	for _, p := range pods.Items {
		seen[p.UID] = true
	}
	wc, err := client.NewWithWatch(b.env.Config, client.Options{Scheme: b.scheme})
	if err != nil {
		return nil, nil, err
	}
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(calico.SystemNamespace), selector,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: pods.ResourceVersion}})
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	perNode := map[string]int{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || seen[p.UID] {
				continue
			}
			node := podNode(p)
			if node == "" {
				continue
			}
			mu.Lock()
			seen[p.UID] = true
			perNode[node]++
			mu.Unlock()
		}
	}()
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(perNode)
	}, w.Stop, nil
}

// podNode is the node a DaemonSet pod is for: its nodeName once bound, else
// the node its required affinity names (the DaemonSet controller pins each
// pod to one node by metadata.name).
func podNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func (b *realBackend) Stop() error {
	b.mu.Lock()
	b.stopping = true
	procs := b.procs
	b.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		errs = append(errs, procs[i].Stop())
	}
	if b.env != nil {
		errs = append(errs, b.env.Stop())
	}
	return errors.Join(errs...)
}

func noEnv() []string { return nil }

// podEnvironment returns what a pod of the Tigera operator Deployment gets as
// KUBERNETES_SERVICE_HOST/PORT when it starts: the kubernetes Service's
// address, with the services-endpoint ConfigMap's keys put over it (envFrom,
// optional). The function reads the ConfigMap at each call.
func podEnvironment(ctx context.Context, c client.Client) (func() []string, error) {
	svc := &corev1.Service{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, svc)
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the kubernetes Service: %w", err)
	}
	service := map[string]string{
		calico.ServiceHostKey: svc.Spec.ClusterIP,
		calico.ServicePortKey: fmt.Sprint(svc.Spec.Ports[0].Port),
	}
	return func() []string {
		env := maps.Clone(service)
		cm := &corev1.ConfigMap{}
		key := client.ObjectKey{Namespace: calico.OperatorNamespace, Name: calico.ServicesEndpointConfigMap}
		if err := c.Get(context.Background(), key, cm); err == nil {
			for _, k := range []string{calico.ServiceHostKey, calico.ServicePortKey} {
				if v, ok := cm.Data[k]; ok {
					env[k] = v
				}
			}
		}
		return []string{calico.ServiceHostKey + "=" + env[calico.ServiceHostKey], calico.ServicePortKey + "=" + env[calico.ServicePortKey]}
	}, nil
}
