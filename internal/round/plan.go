package round

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Data keys of plans and reports. NodeKey is a key of its own in both: the
// report policy (config/admission reports.yaml) checks it against the node
// of the agent's token. The round is in their labels (PlanLabel,
// ReportLabel); every byte of a plan is read by one agent each, 5,000 times
// in a round of 5,000 nodes.
const (
	NodeKey   = "node"
	PlanKey   = "plan"
	StageKey  = "stage"
	AddrKey   = "addr"
	ErrorKey  = "error"
	ResultKey = "result"
)

// Plan is one agent's part of a round, with the kind's parameters P.
type Plan[P any] struct {
	Round ID
	Node  string
	// Addr is the address the agent is reached at.
	Addr netip.Addr
	// Start and End are the round's window, on the manager's clock, the same
	// for every agent: an agent waits for the start and works until the end,
	// however late it came up.
	Start, End time.Time
	// Peers are the agents it tests; Expect those that test it.
	Peers, Expect []netip.Addr
	Params        P
}

// planBody is a plan's encoding, in its ConfigMap's PlanKey.
type planBody[P any] struct {
	Addr   netip.Addr   `json:"addr"`
	Start  time.Time    `json:"start"`
	End    time.Time    `json:"end"`
	Peers  []netip.Addr `json:"peers,omitempty"`
	Expect []netip.Addr `json:"expect,omitempty"`
	Params P            `json:"params"`
}

// Window is when an agent that came up at up works: from the start, or from
// up if later, until the end. It fails when less than least is left.
func (p Plan[P]) Window(up time.Time, least time.Duration) (from, until time.Time, err error) {
	from = up
	if from.Before(p.Start) {
		from = p.Start
	}
	if p.End.Sub(from) < least {
		return from, p.End, fmt.Errorf("the agent came up %s after its round began, too late to work in a window of %s: "+
			"its pod took that long to be scheduled or to pull its image", up.Sub(p.Start).Round(time.Second), p.End.Sub(p.Start))
	}
	return from, p.End, nil
}

// PlanObject is the ConfigMap of an agent's plan, named after its node. It
// has no owner, which would cost every agent's read a reference: like the
// reports, plans go when their round ends or the next one starts.
func PlanObject[P any](k Kind, namespace string, p Plan[P]) (*corev1.ConfigMap, error) {
	body, err := json.Marshal(planBody[P]{Addr: p.Addr, Start: p.Start.UTC(), End: p.End.UTC(), Peers: p.Peers, Expect: p.Expect, Params: p.Params})
	if err != nil {
		return nil, fmt.Errorf("encoding the plan of %s: %w", p.Node, err)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: k.PlanName(p.Node),
			Labels: map[string]string{ComponentLabel: k.Component, PlanLabel: string(p.Round)}},
		Data: map[string]string{NodeKey: p.Node, PlanKey: string(body)},
	}, nil
}

// DecodePlan reads a plan's ConfigMap.
func DecodePlan[P any](cm *corev1.ConfigMap) (Plan[P], error) {
	p := Plan[P]{Round: ID(cm.Labels[PlanLabel]), Node: cm.Data[NodeKey]}
	if p.Round == "" || p.Node == "" {
		return p, errors.New("not a plan: no round or node")
	}
	var body planBody[P]
	if err := json.Unmarshal([]byte(cm.Data[PlanKey]), &body); err != nil {
		return p, fmt.Errorf("the plan of %s: %w", p.Node, err)
	}
	p.Addr, p.Start, p.End, p.Peers, p.Expect, p.Params = body.Addr, body.Start, body.End, body.Peers, body.Expect, body.Params
	return p, nil
}
