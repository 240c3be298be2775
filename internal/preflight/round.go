package preflight

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The objects of a probe round, all in the probe namespace: a plan
// ConfigMap and a DaemonSet of agents, both named ProbeName, and one report
// ConfigMap per node.
const (
	// DefaultProbeNamespace is the probe agents' own namespace, which
	// enforces the privileged Pod Security level (config/probe).
	DefaultProbeNamespace = "winready-probe"
	ProbeName             = "winready-probe"
	ProbeServiceAccount   = "winready-probe"
	// ReportLabel marks report ConfigMaps; its value is the round.
	ReportLabel = "winready.io/probe-round"
	// ComponentLabel tells the kinds of report apart: the UDP probe's carry
	// ProbeComponent, the pod network check's its own. Admission holds each
	// agent to its kind's value, so that a pod network check token cannot
	// write a report the probe round counts.
	ComponentLabel = "app.kubernetes.io/component"
	ProbeComponent = "probe"
	// Plan keys besides one key per node name.
	PlanRound    = "round"
	PlanDuration = "duration"
	PlanExtra    = "extra"
	// PlanSecret is the round's random secret (hex), with which the agents
	// sign their probes. The plan is readable only by the manager and the
	// round's agents, so no other pod can forge a probe that counts.
	PlanSecret = PlanMetaPrefix + "secret"
	// Report keys.
	ReportNode         = "node"
	ReportRound        = "round"
	ReportMode         = "mode"
	ReportReceivedFrom = "receivedFrom"
	ReportEchoedBy     = "echoedBy"
	ReportError        = "error"

	linuxLabel = "kubernetes.io/os"
)

// RoundConfig is how the operator runs probe rounds.
type RoundConfig struct {
	Namespace string
	// Image is the operator's own image, which holds the agent.
	Image    string
	Duration time.Duration
	Extra    []netip.Addr
}

// ListLinuxNodes lists the Linux nodes with an InternalIP, a page at a time
// so that a large cluster's Node objects are never all in memory at once.
func ListLinuxNodes(ctx context.Context, r client.Reader) ([]ProbeNode, error) {
	var nodes []ProbeNode
	opts := []client.ListOption{client.MatchingLabels{linuxLabel: "linux"}, client.Limit(500)}
	for cont := ""; ; {
		list := &corev1.NodeList{}
		if err := r.List(ctx, list, append(opts, client.Continue(cont))...); err != nil {
			return nil, fmt.Errorf("listing linux nodes: %w", err)
		}
		for _, n := range list.Items {
			for _, a := range n.Status.Addresses {
				if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is4() {
					nodes = append(nodes, ProbeNode{Name: n.Name, IP: ip})
					break
				}
			}
		}
		if cont = list.Continue; cont == "" {
			return nodes, nil
		}
	}
}

// EncodePlan writes the round's plan as ConfigMap data: one key per node,
// "<address>|<peer>,<peer>".
func EncodePlan(round string, cfg RoundConfig, nodes []ProbeNode, plan map[string][]netip.Addr) map[string]string {
	data := map[string]string{PlanRound: round, PlanDuration: cfg.Duration.String(), PlanExtra: joinAddrs(cfg.Extra)}
	for _, n := range nodes {
		data[n.Name] = n.IP.String() + "|" + joinAddrs(plan[n.Name])
	}
	return data
}

// NodePlan is one agent's part of the plan.
type NodePlan struct {
	Round    string
	Duration time.Duration
	IP       netip.Addr
	Peers    []netip.Addr
	Extra    []netip.Addr
	// Secret is the round's secret; empty in a plan without one (the pod
	// network check's).
	Secret []byte
}

// DecodePlan reads node's part of a plan ConfigMap.
func DecodePlan(data map[string]string, node string) (NodePlan, error) {
	entry, ok := data[node]
	if !ok {
		return NodePlan{}, fmt.Errorf("the plan has no entry for node %s", node)
	}
	ipText, peersText, _ := strings.Cut(entry, "|")
	ip, err := netip.ParseAddr(ipText)
	if err != nil {
		return NodePlan{}, fmt.Errorf("plan entry of %s: %w", node, err)
	}
	d, err := time.ParseDuration(data[PlanDuration])
	if err != nil {
		return NodePlan{}, fmt.Errorf("plan duration: %w", err)
	}
	peers, err := splitAddrs(peersText)
	if err != nil {
		return NodePlan{}, err
	}
	extra, err := splitAddrs(data[PlanExtra])
	if err != nil {
		return NodePlan{}, err
	}
	secret, err := hex.DecodeString(data[PlanSecret])
	if err != nil {
		return NodePlan{}, fmt.Errorf("plan secret: %w", err)
	}
	return NodePlan{Round: data[PlanRound], Duration: d, IP: ip, Peers: peers, Extra: extra, Secret: secret}, nil
}

// ReadPlan reads back the plan the agents of round were given: the nodes and
// the peers each probes. The aggregation counts against it, not against the
// nodes of now, so that a node that joins or leaves mid-round makes no false
// failing pair. It returns no nodes when the plan is gone or belongs to
// another round.
func ReadPlan(ctx context.Context, r client.Reader, namespace, round string) ([]ProbeNode, map[string][]netip.Addr, error) {
	return ReadRoundPlan(ctx, r, namespace, ProbeName, round)
}

// PlanMetaPrefix starts the plan keys that carry a kind of round's own
// settings: no node name starts with it.
const PlanMetaPrefix = "_"

// ReadRoundPlan is ReadPlan for the plan ConfigMap named name, that of any
// kind of round.
func ReadRoundPlan(ctx context.Context, r client.Reader, namespace, name, round string) ([]ProbeNode, map[string][]netip.Addr, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading the probe plan: %w", err)
	}
	if cm.Data[PlanRound] != round {
		return nil, nil, nil
	}
	var nodes []ProbeNode
	plan := map[string][]netip.Addr{}
	for name := range cm.Data {
		if name == PlanRound || name == PlanDuration || name == PlanExtra || strings.HasPrefix(name, PlanMetaPrefix) {
			continue
		}
		np, err := DecodePlan(cm.Data, name)
		if err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, ProbeNode{Name: name, IP: np.IP})
		plan[name] = np.Peers
	}
	slices.SortFunc(nodes, func(a, b ProbeNode) int { return strings.Compare(a.Name, b.Name) })
	return nodes, plan, nil
}

// StartRound writes the plan and starts the agents.
func StartRound(ctx context.Context, c client.Client, cfg RoundConfig, round string, nodes []ProbeNode, owner []metav1.OwnerReference) error {
	plan := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: ProbeName, OwnerReferences: owner},
		Data:       EncodePlan(round, cfg, nodes, Plan(nodes, round)),
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("making the probe round's secret: %w", err)
	}
	plan.Data[PlanSecret] = hex.EncodeToString(secret)
	if err := Cleanup(ctx, c, cfg.Namespace); err != nil {
		return err
	}
	if err := c.Create(ctx, plan); err != nil {
		return fmt.Errorf("writing the probe plan: %w", err)
	}
	if err := c.Create(ctx, AgentDaemonSet(cfg, round, owner)); err != nil {
		return fmt.Errorf("starting the probe agents: %w", err)
	}
	return nil
}

// AgentDaemonSet runs one agent on every Linux node, on the host network so
// that probes leave from and arrive at node addresses. Its exceptions to the
// restricted Pod Security Standard: hostNetwork, and root with only
// CAP_NET_RAW (Kubernetes grants added capabilities to root only), which the
// capture of UDP 4789 needs while a VXLAN device owns the port.
func AgentDaemonSet(cfg RoundConfig, round string, owner []metav1.OwnerReference) *appsv1.DaemonSet {
	labels := map[string]string{"app.kubernetes.io/name": "winready", "app.kubernetes.io/component": "probe"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: ProbeName, Labels: labels, OwnerReferences: owner},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{ReportLabel: round}},
				Spec: corev1.PodSpec{
					ServiceAccountName: ProbeServiceAccount,
					HostNetwork:        true,
					DNSPolicy:          corev1.DNSClusterFirstWithHostNet,
					NodeSelector:       map[string]string{linuxLabel: "linux"},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:  "probe",
						Image: cfg.Image,
						Args:  []string{"probe", "--namespace=" + cfg.Namespace},
						Env: []corev1.EnvVar{{
							Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}},
						}},
						SecurityContext: &corev1.SecurityContext{
							RunAsUser:                ptr.To[int64](0),
							RunAsNonRoot:             ptr.To(false),
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_RAW"}},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
				},
			},
		},
	}
}

// ReportName is the report ConfigMap of a node; long node names are hashed
// to fit a name.
func ReportName(node string) string { return RoundReportName(ProbeName, node) }

// RoundReportName is ReportName for the kind of round whose objects are
// named kind.
func RoundReportName(kind, node string) string {
	name := kind + "-report-" + node
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	return kind + "-report-" + hex.EncodeToString(sum[:16])
}

// ReportLabels are the labels of an agent's report of round.
func ReportLabels(round string) map[string]string {
	return map[string]string{ReportLabel: round, ComponentLabel: ProbeComponent}
}

// EncodeReport is the ConfigMap data of an agent's report.
func EncodeReport(round, node, mode string, receivedFrom, echoedBy []netip.Addr, failure string) map[string]string {
	return map[string]string{ReportRound: round, ReportNode: node, ReportMode: mode,
		ReportReceivedFrom: joinAddrs(receivedFrom), ReportEchoedBy: joinAddrs(echoedBy), ReportError: failure}
}

// ReadReports reads the reports of a round. A report whose agent failed
// counts as missing, with its error kept for the message.
func ReadReports(ctx context.Context, r client.Reader, namespace, round string) ([]Report, map[string]string, error) {
	list := &corev1.ConfigMapList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(ReportLabels(round))); err != nil {
		return nil, nil, fmt.Errorf("listing probe reports: %w", err)
	}
	reports := make([]Report, 0, len(list.Items))
	failures := map[string]string{}
	for _, cm := range list.Items {
		d := cm.Data
		if d[ReportError] != "" {
			failures[d[ReportNode]] = d[ReportError]
			continue
		}
		from, err1 := splitAddrs(d[ReportReceivedFrom])
		echoed, err2 := splitAddrs(d[ReportEchoedBy])
		if err1 != nil || err2 != nil {
			failures[d[ReportNode]] = "unreadable report"
			continue
		}
		reports = append(reports, Report{Node: d[ReportNode], ReceivedFrom: from, EchoedBy: echoed})
	}
	return reports, failures, nil
}

// Cleanup removes the agents, the plan and every report.
func Cleanup(ctx context.Context, c client.Client, namespace string) error {
	for _, obj := range []client.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ProbeName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ProbeName}},
	} {
		if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing probe %T: %w", obj, err)
		}
	}
	err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(namespace), client.HasLabels{ReportLabel})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing probe reports: %w", err)
	}
	return nil
}

func joinAddrs(addrs []netip.Addr) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}

func splitAddrs(s string) ([]netip.Addr, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	addrs := make([]netip.Addr, 0, len(parts))
	for _, p := range parts {
		a, err := netip.ParseAddr(p)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", p, err)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// RoundID names a round after the spec generation and the time it started.
func RoundID(generation int64, now time.Time) string {
	return "g" + strconv.FormatInt(generation, 10) + "-" + strconv.FormatInt(now.Unix(), 36)
}
