package podcheck

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/internal/preflight"
)

// The objects of a check round, in the probe namespace next to the UDP
// probe's and labelled apart from them: a DaemonSet of check pods and a
// Service over them, both named Name, a plan ConfigMap named Name written
// once every pod serves, and one report ConfigMap per node.
const (
	Name           = "winready-podcheck"
	ServiceAccount = "winready-podcheck"
	// ComponentLabel's value Component tells the check's objects from the
	// UDP probe's ("probe").
	ComponentLabel = "app.kubernetes.io/component"
	Component      = "podcheck"
	// DNSName is what every pod looks up through kube-dns.
	DNSName = "kubernetes.default"
	// RunAs is the check pods' user and group (non-root, no capability).
	RunAs int64 = 65532
)

// Labels are the labels of every object of a check round.
func Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "winready", ComponentLabel: Component}
}

// DaemonSet runs one check pod on every Linux node, on the pod network. The
// pods meet the restricted Pod Security level: non-root, every capability
// dropped, no privilege escalation, seccomp RuntimeDefault, a read-only root
// filesystem. ICMP needs no capability: the pod's own network namespace lets
// its group open ICMP datagram sockets (net.ipv4.ping_group_range, a safe
// sysctl).
func DaemonSet(cfg preflight.RoundConfig, round string, owner []metav1.OwnerReference) *appsv1.DaemonSet {
	labels := Labels()
	group := fmt.Sprint(RunAs)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: Name, Labels: labels, OwnerReferences: owner},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{preflight.ReportLabel: round}},
				Spec: corev1.PodSpec{
					ServiceAccountName:            ServiceAccount,
					NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(RunAs),
						RunAsGroup:     ptr.To(RunAs),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ping_group_range", Value: group + " " + group}},
					},
					Containers: []corev1.Container{checkContainer(cfg)},
				},
			},
		},
	}
}

func checkContainer(cfg preflight.RoundConfig) corev1.Container {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return corev1.Container{
		Name:  "podcheck",
		Image: cfg.Image,
		Args:  []string{"podcheck", "--namespace=" + cfg.Namespace},
		Env: []corev1.EnvVar{field("NODE_NAME", "spec.nodeName"), field("POD_IP", "status.podIP"),
			field("ROUND", "metadata.annotations['"+preflight.ReportLabel+"']")},
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
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name, Labels: Labels(), OwnerReferences: owner},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: Labels(),
			Ports:    []corev1.ServicePort{{Name: "echo", Port: Port, TargetPort: intstr.FromInt32(Port), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// Start removes what is left of an earlier round and starts the pods and
// their Service. The plan follows once the pods serve (WritePlan).
func Start(ctx context.Context, c client.Client, cfg preflight.RoundConfig, round string, owner []metav1.OwnerReference) error {
	if err := Cleanup(ctx, c, cfg.Namespace); err != nil {
		return err
	}
	if err := c.Create(ctx, Service(cfg.Namespace, owner)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the pod network check's Service: %w", err)
	}
	if err := c.Create(ctx, DaemonSet(cfg, round, owner)); err != nil {
		return fmt.Errorf("starting the pod network check pods: %w", err)
	}
	return nil
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
		return netip.AddrPort{}, nil
	}
	return netip.AddrPortFrom(ip, Port), nil
}

// Plan pairs the serving pods: each tests the pods of its peers on other
// nodes (every other node up to 16 nodes, else 3 in a ring). seed orders
// the ring: rounds with the same seed and nodes test the same pairs, so that
// a round after a step compares pair by pair with the baseline.
func Plan(cfg preflight.RoundConfig, round, seed string, pods []preflight.ProbeNode, s PlanSettings) map[string]string {
	data := preflight.EncodePlan(round, cfg, pods, preflight.Plan(pods, seed))
	EncodeSettings(data, s)
	return data
}

// WritePlan writes the round's plan; the pods wait for it.
func WritePlan(ctx context.Context, c client.Client, namespace string, data map[string]string, owner []metav1.OwnerReference) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name, Labels: Labels(), OwnerReferences: owner}, Data: data}
	err := c.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		// A create whose response was lost, or a plan left over: write it
		// afresh.
		old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name}}
		if err = client.IgnoreNotFound(c.Delete(ctx, old)); err == nil {
			err = c.Create(ctx, cm)
		}
	}
	if err != nil {
		return fmt.Errorf("writing the pod network check plan: %w", err)
	}
	return nil
}

// ReadPlan reads back a round's plan: the pods and the peers each tests.
func ReadPlan(ctx context.Context, r client.Reader, namespace, round string) ([]preflight.ProbeNode, map[string][]netip.Addr, error) {
	return preflight.ReadRoundPlan(ctx, r, namespace, Name, round)
}

// ReportName is the report ConfigMap of a node's check pod.
func ReportName(node string) string { return preflight.RoundReportName(Name, node) }

// Report is the report ConfigMap of a node's check pod with data.
func Report(namespace, round, node string, data map[string]string) *corev1.ConfigMap {
	labels := Labels()
	labels[preflight.ReportLabel] = round
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ReportName(node), Labels: labels}, Data: data}
}

// ReadReports reads the reports of a round, sorted by node; an unreadable
// report is kept with its error.
func ReadReports(ctx context.Context, r client.Reader, namespace, round string) ([]NodeReport, error) {
	list := &corev1.ConfigMapList{}
	sel := client.MatchingLabels{preflight.ReportLabel: round, ComponentLabel: Component}
	if err := r.List(ctx, list, client.InNamespace(namespace), sel); err != nil {
		return nil, fmt.Errorf("listing pod network check reports: %w", err)
	}
	reports := make([]NodeReport, 0, len(list.Items))
	for _, cm := range list.Items {
		rep, err := DecodeReport(cm.Data)
		if err != nil {
			rep = NodeReport{Node: cm.Data[preflight.ReportNode], Stage: StageDone, Error: err.Error()}
		}
		reports = append(reports, rep)
	}
	slices.SortFunc(reports, func(a, b NodeReport) int { return strings.Compare(a.Node, b.Node) })
	return reports, nil
}

// Cleanup removes the pods, the Service, the plan and every report of the
// check, and nothing of the UDP probe's.
func Cleanup(ctx context.Context, c client.Client, namespace string) error {
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	meta := metav1.ObjectMeta{Namespace: namespace, Name: Name}
	for _, obj := range []client.Object{&appsv1.DaemonSet{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta}, &corev1.ConfigMap{ObjectMeta: meta}} {
		if err := c.Delete(ctx, obj, bg); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the pod network check's %T: %w", obj, err)
		}
	}
	err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(namespace),
		client.MatchingLabels{ComponentLabel: Component}, client.HasLabels{preflight.ReportLabel})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing pod network check reports: %w", err)
	}
	return nil
}
