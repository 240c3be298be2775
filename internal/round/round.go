package round

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

// Labels and names of a round's objects, in the probe namespace.
const (
	// DefaultNamespace is the agents' own namespace, which enforces the
	// privileged Pod Security level for the UDP probe (config/probe).
	DefaultNamespace = "winready-probe"
	// ReportLabel marks reports; its value is the round. The manager caches
	// the ConfigMaps that carry it.
	ReportLabel = "winready.io/probe-round"
	// PlanLabel marks plans; its value is the round. Plans stay out of the
	// manager's cache: it reads them once, to judge the reports.
	PlanLabel = "winready.io/plan-round"
	// ComponentLabel tells the kinds apart; admission holds each kind's
	// agents to their own kind's reports.
	ComponentLabel = "app.kubernetes.io/component"
	NameLabel      = "app.kubernetes.io/name"
	// Name is NameLabel's value on every object winready makes.
	Name = "winready"
	// RoundAnnotation on the agents' pod template names their round.
	RoundAnnotation = ReportLabel

	linuxLabel = "kubernetes.io/os"
)

// ID identifies a round.
type ID string

// NewID names a round after the spec generation, the time it started and a
// random part, so that two rounds never share an ID, even within a second
// or on a stopped clock.
func NewID(generation int64, now time.Time) ID {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return ID("g" + strconv.FormatInt(generation, 10) + "-" + strconv.FormatInt(now.Unix(), 36) + "-" + hex.EncodeToString(b[:]))
}

// Token is a request for a new round: a short hash of the value of a rerun
// annotation. A round records the token it ran for; another token asks for
// another round. The empty token is no request.
type Token string

// TokenOf is the token of a rerun annotation's value.
func TokenOf(annotation string) Token {
	if annotation == "" {
		return ""
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(annotation))
	return Token(strconv.FormatUint(uint64(h.Sum32()), 16))
}

// TokenOfState is the token a round ran for. Rounds recorded before the
// token had a field of its own carried it as their ID's third part,
// "g<generation>-<time>-r<token>"; a third part of today's is hexadecimal,
// never starting with r.
func TokenOfState(st *v1alpha1.RoundState) Token {
	if st.RerunToken != "" {
		return Token(st.RerunToken)
	}
	if parts := strings.Split(st.Round, "-"); len(parts) == 3 && strings.HasPrefix(parts[2], "r") {
		return Token(parts[2][1:])
	}
	return ""
}

// Member is an agent's node and the address its peers reach it at.
type Member struct {
	Node string
	Addr netip.Addr
}

// ListLinuxNodes lists the Linux nodes with an IPv4 InternalIP, a page at a
// time, so that a large cluster's Node objects are never all in memory.
func ListLinuxNodes(ctx context.Context, r client.Reader) ([]Member, error) {
	var nodes []Member
	opts := []client.ListOption{client.MatchingLabels{linuxLabel: "linux"}, client.Limit(500)}
	for cont := ""; ; {
		list := &corev1.NodeList{}
		if err := r.List(ctx, list, append(opts, client.Continue(cont))...); err != nil {
			return nil, fmt.Errorf("listing linux nodes: %w", err)
		}
		for _, n := range list.Items {
			for _, a := range n.Status.Addresses {
				if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is4() {
					nodes = append(nodes, Member{Node: n.Name, Addr: ip})
					break
				}
			}
		}
		if cont = list.Continue; cont == "" {
			return nodes, nil
		}
	}
}

// Kind is what a user of the engine says about its rounds.
type Kind struct {
	// Name names the agents' DaemonSet and ServiceAccount, and starts the
	// name of every object of a round.
	Name string
	// Component is ComponentLabel's value on the round's objects.
	Component string
	// PlanOnServe makes the plan wait for the agents: each first reports
	// that it serves, with the address its peers reach it at, and the agents
	// that serve in time are paired. Otherwise every Linux node is paired at
	// the start, at its InternalIP.
	PlanOnServe bool
	// Secret gives each round a random key, in the Secret named Name.
	Secret bool
	// Pod is the agents' pod, given the namespace and the image; the engine
	// adds the node selector, the tolerations, the labels and the round.
	Pod func(namespace, image string) corev1.PodSpec
	// Objects, when set, are made with the agents and removed with them.
	Objects func(namespace string, owner []metav1.OwnerReference) []client.Object
}

// Labels are the labels of the kind's DaemonSet and its pods.
func (k Kind) Labels() map[string]string {
	return map[string]string{NameLabel: Name, ComponentLabel: k.Component}
}

// PlanName is the name of node's plan.
func (k Kind) PlanName(node string) string { return objectName(k.Name+"-plan-", node) }

// ReportName is the name of node's report. Admission checks it against the
// node of the agent's token (config/admission reports.yaml).
func (k Kind) ReportName(node string) string { return objectName(k.Name+"-report-", node) }

// objectName is prefix+node, or for a node name too long for that, prefix
// and a hash of the name (32 hexadecimal characters).
func objectName(prefix, node string) string {
	if len(prefix)+len(node) <= 253 {
		return prefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return prefix + hex.EncodeToString(sum[:16])
}

// Owner is the owner reference of a round's objects: the WindowsReadiness,
// so that they go with it.
func Owner(wr *v1alpha1.WindowsReadiness) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WindowsReadiness", Name: wr.Name, UID: wr.UID}}
}

// Stage is where a round stands.
type Stage string

const (
	// NotStarted is no round, or a skipped one.
	NotStarted Stage = "NotStarted"
	// Pairing means the agents start; for a kind that plans on serving, the
	// manager waits for them to serve.
	Pairing Stage = "Pairing"
	// Collecting means every agent has its plan; the manager waits for reports.
	Collecting Stage = "Collecting"
	// Complete means the reports are judged and the round's objects removed.
	Complete Stage = "Complete"
)

// StageOf is where the round in st stands.
func StageOf(st *v1alpha1.RoundState) Stage {
	switch {
	case st == nil || st.Round == "" || st.StartedAt == nil:
		return NotStarted
	case st.CompletedAt != nil:
		return Complete
	case st.PlannedAt == nil:
		return Pairing
	}
	return Collecting
}
