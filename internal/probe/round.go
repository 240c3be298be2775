package probe

import (
	"context"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/round"
)

// ServiceAccount is the agents' identity.
const ServiceAccount = "winready-probe"

// RoundKind is the UDP 4789 probe's rounds: one agent on the host network
// of every Linux node, paired with the nodes' InternalIPs at the start,
// signing its probes with the round's key.
var RoundKind = round.Kind{Name: "winready-probe", Component: "probe", Secret: true, Pod: agentPod}

// Params are what every agent of a round gets.
type Params struct {
	// Extra are responders (future Windows nodes) every agent probes.
	Extra []netip.Addr `json:"extra,omitempty"`
}

// Engine runs the probe's rounds.
type Engine = round.Engine[Params, Result]

// agentPod is the agent's pod, on the host network so that probes leave
// from and arrive at node addresses. Its exceptions to the restricted Pod
// Security Standard: hostNetwork, and root with only CAP_NET_RAW (Kubernetes
// grants added capabilities to root only), which the capture of UDP 4789
// needs while a VXLAN device owns the port.
func agentPod(namespace, image string) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName: ServiceAccount,
		HostNetwork:        true,
		DNSPolicy:          corev1.DNSClusterFirstWithHostNet,
		Containers: []corev1.Container{{
			Name:  "probe",
			Image: image,
			Args:  []string{"probe", "--namespace=" + namespace},
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
	}
}

// LeastWindow is the least of its window an agent must have left to
// probe: a few of its probes, and their answers. An agent that comes up
// later reports that it came too late, and counts as missing.
const LeastWindow = 2 * time.Second

// Prober probes a round's peers: Agent, over the node's sockets.
type Prober interface {
	// Run probes within the round's window and calls report once, as soon as
	// the result is complete or else at the window's end.
	Run(ctx context.Context, report func(Result)) Result
}

// Network opens a Prober for an agent's round: Sockets in the agent's pod, a
// simulated network in the benchmarks.
type Network func(AgentConfig) (Prober, error)

// Sockets opens an Agent on the node's sockets.
func Sockets(cfg AgentConfig) (Prober, error) { return Open(cfg) }

// RunRound is an agent's round: it waits for its plan and the round's key,
// probes its peers over network until every probe it expects has come and
// every extra target has echoed (or its window ends), and reports; it goes
// on probing until the window ends, for peers that came up later.
func RunRound(ctx context.Context, a round.Agent[Params, Result], network Network) error {
	plan, err := a.Plan(ctx, "")
	if err != nil {
		return err
	}
	report := func(r Result, failure error) error {
		rep := round.Report[Result]{Round: plan.Round, Stage: round.Done, Addr: plan.Addr, Result: r}
		if failure != nil {
			rep.Error = failure.Error()
		}
		return a.Report(ctx, rep)
	}
	secret, err := a.Secret(ctx, plan.Round)
	if err != nil {
		// Unsigned probes could be forged by any pod: without the round's
		// key the agent does not probe, and its node counts as missing.
		return report(Result{}, err)
	}
	if _, _, err := plan.Window(a.Now(), LeastWindow); err != nil {
		return report(Result{}, err)
	}
	agent, err := network(AgentConfig{Round: RoundKey(string(plan.Round)), Secret: secret, NodeIP: plan.Addr,
		Peers: plan.Peers, Expect: plan.Expect, Extra: plan.Params.Extra, Start: plan.Start, End: plan.End})
	if err != nil {
		return report(Result{}, err)
	}
	var written error
	agent.Run(ctx, func(r Result) { written = report(r, nil) })
	return written
}

// Judge checks every planned pair against the reports: a pair passes when
// the receiving node reported the sender's probe (or, for an extra target,
// when the sender got its echo). An agent that did not report sent nothing
// that counts: it is missing, and its peers' receipts of it are not failing
// pairs, and what it said of why it could not probe is kept. Lists in the
// result are bounded.
func Judge(res round.Results[Params, Result]) v1alpha1.ProbeStatus {
	byAddr := make(map[netip.Addr]string, len(res.Plans))
	for _, p := range res.Plans {
		byAddr[p.Addr] = p.Node
	}
	var failing round.Listed[v1alpha1.ProbePair]
	var missing round.Listed[string]
	var st v1alpha1.ProbeStatus
	label := func(node string, addr netip.Addr) func() string {
		return func() string { return node + " (" + addr.String() + ")" }
	}
	for _, p := range res.Plans {
		mine, ok := res.Reports[p.Node]
		if !ok {
			missing.Add(func() string { return p.Node })
			continue
		}
		for _, peer := range p.Peers {
			theirs, ok := res.Reports[byAddr[peer]]
			if !ok {
				continue // counted as a missing report, not as a failing pair
			}
			st.PlannedPairs++
			if slices.Contains(theirs.Result.ReceivedFrom, p.Addr) {
				st.PassedPairs++
			} else {
				failing.Add(func() v1alpha1.ProbePair {
					return v1alpha1.ProbePair{From: label(p.Node, p.Addr)(), To: label(byAddr[peer], peer)()}
				})
			}
		}
		for _, e := range p.Params.Extra {
			st.PlannedPairs++
			if slices.Contains(mine.Result.EchoedBy, e) {
				st.PassedPairs++
			} else {
				failing.Add(func() v1alpha1.ProbePair {
					return v1alpha1.ProbePair{From: label(p.Node, p.Addr)(), To: e.String() + " (extra target)"}
				})
			}
		}
	}
	st.FailingPairs, st.FirstFailing = int32(failing.Count), failing.First
	st.MissingReports, st.FirstMissing = int32(missing.Count), missing.First
	for _, node := range st.FirstMissing {
		if why := res.Failed[node]; why != "" {
			st.MissingReasons = append(st.MissingReasons, v1alpha1.MissingReason{Node: node, Reason: why})
		}
	}
	return st
}
