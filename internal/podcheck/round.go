package podcheck

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/round"
)

// The objects of a check round, in the probe namespace next to the UDP
// probe's and labelled apart from them: a DaemonSet of check pods and a
// Service over them, both named Name, and the plans and reports of the
// round engine.
const (
	Name           = "winready-podcheck"
	ServiceAccount = "winready-podcheck"
	// Component is round.ComponentLabel's value on the check's objects.
	Component = "podcheck"
	// DNSName is what every pod looks up through kube-dns.
	DNSName = "kubernetes.default"
	// RunAs is the check pods' user and group (non-root, no capability).
	RunAs int64 = 65532
)

// RoundKind is the pod network check's rounds: a pod on the pod network of
// every Linux node, paired once it serves its echo, at its pod address.
var RoundKind = round.Kind{Name: Name, Component: Component, PlanOnServe: true, Pod: checkPod,
	Objects: func(namespace string, owner []metav1.OwnerReference) []client.Object {
		return []client.Object{Service(namespace, owner)}
	}}

// Params are what every pod of a round gets.
type Params struct {
	// Service is the ClusterIP and port of the Service whose backends are
	// the check pods; zero skips the Service check.
	Service netip.AddrPort `json:"service"`
	DNSName string         `json:"dns,omitempty"`
	MTU     int            `json:"mtu,omitempty"`
}

// Engine runs the check's rounds.
type Engine = round.Engine[Params, Result]

// checkPod runs a check pod on the pod network. It meets the restricted Pod
// Security level: non-root, every capability dropped, no privilege
// escalation, seccomp RuntimeDefault, a read-only root filesystem. ICMP
// needs no capability: the pod's own network namespace lets its group open
// ICMP datagram sockets (net.ipv4.ping_group_range, a safe sysctl).
func checkPod(namespace, image string) corev1.PodSpec {
	group := fmt.Sprint(RunAs)
	return corev1.PodSpec{
		ServiceAccountName:            ServiceAccount,
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(RunAs),
			RunAsGroup:     ptr.To(RunAs),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ping_group_range", Value: group + " " + group}},
		},
		Containers: []corev1.Container{checkContainer(namespace, image)},
	}
}

func checkContainer(namespace, image string) corev1.Container {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return corev1.Container{
		Name:  "podcheck",
		Image: image,
		Args:  []string{"podcheck", "--namespace=" + namespace},
		Env: []corev1.EnvVar{field("NODE_NAME", "spec.nodeName"), field("POD_IP", "status.podIP"),
			field("ROUND", "metadata.annotations['"+round.RoundAnnotation+"']")},
		Ports: []corev1.ContainerPort{{Name: "echo", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		// Ready once the echo serves: only then is the pod a Service backend.
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(Port)}},
			PeriodSeconds: 2},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// Service is the ClusterIP Service whose backends are the check pods, one
// per node.
func Service(namespace string, owner []metav1.OwnerReference) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name, Labels: podLabels(), OwnerReferences: owner},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: podLabels(),
			Ports:    []corev1.ServicePort{{Name: "echo", Port: Port, TargetPort: intstr.FromInt32(Port), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// podLabels are the check pods' labels (RoundKind.Labels).
func podLabels() map[string]string {
	return map[string]string{round.NameLabel: round.Name, round.ComponentLabel: Component}
}

// ServiceAddr is the ClusterIP and port of the round's Service, invalid
// while none is assigned.
func ServiceAddr(ctx context.Context, r client.Reader, namespace string) (netip.AddrPort, error) {
	svc := &corev1.Service{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: Name}, svc); err != nil {
		return netip.AddrPort{}, client.IgnoreNotFound(err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return netip.AddrPort{}, nil //nolint:nilerr // no ClusterIP yet: the zero address says the Service is not ready
	}
	return netip.AddrPortFrom(ip, Port), nil
}

// leastWindow is the least of its window a pod must have left to test.
const leastWindow = 2 * time.Second

// Checks runs a pod's checks: Run in the check pod, a simulated network in
// the benchmarks.
type Checks func(context.Context, Config) Result

// RunRound is a check pod's round, once its echo serves: ReportServing, then Check.
func RunRound(ctx context.Context, a round.Agent[Params, Result], id round.ID, podIP netip.Addr, check Checks) error {
	if err := ReportServing(ctx, a, id, podIP); err != nil {
		return err
	}
	return Check(ctx, a, id, podIP, check)
}

// ReportServing says that the pod's echo serves at podIP: the round plans each
// pod's peers from these reports.
func ReportServing(ctx context.Context, a round.Agent[Params, Result], id round.ID, podIP netip.Addr) error {
	return a.Report(ctx, round.Report[Result]{Round: id, Stage: round.Serving, Addr: podIP})
}

// Check waits for the pod's plan, runs check within the round's window and
// reports the result. The window is the agent's: it opens and closes on
// the agent's clock (a.Now), so that an agent simulated on a clock of its
// own waits no wall time.
func Check(ctx context.Context, a round.Agent[Params, Result], id round.ID, podIP netip.Addr, check Checks) error {
	plan, err := a.Plan(ctx, id)
	if err != nil {
		return err
	}
	done := round.Report[Result]{Round: id, Stage: round.Done, Addr: podIP}
	now := a.Now()
	from, until, err := plan.Window(now, leastWindow)
	if err != nil {
		done.Error = err.Error()
		return a.Report(ctx, done)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(from.Sub(now)):
	}
	checkCtx, cancel := context.WithTimeout(ctx, until.Sub(from))
	defer cancel()
	done.Result = check(checkCtx, Config{PodIP: podIP, Peers: plan.Peers, Service: plan.Params.Service, DNSName: plan.Params.DNSName,
		MTU: plan.Params.MTU})
	return a.Report(ctx, done)
}
