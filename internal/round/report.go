package round

import (
	"encoding/json"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReportStage is how far an agent has come.
type ReportStage string

const (
	// Serving means the agent serves at Addr and waits for its plan (kinds that
	// plan on serving).
	Serving ReportStage = "Serving"
	// Done means the agent did its work, or says in Error why it could not.
	Done ReportStage = "Done"
)

// Report is one agent's report, with the kind's result R.
type Report[R any] struct {
	Round ID
	Node  string
	Stage ReportStage
	Addr  netip.Addr
	// Error says why the agent could not work: the node counts as missing,
	// not as failed pairs.
	Error  string
	Result R
}

// maxError bounds a report's error.
const maxError = 512

// ReportObject is the ConfigMap of an agent's report, named after its node.
// The stage and the address are keys of their own, so that the manager
// counts and pairs agents without decoding results.
func ReportObject[R any](k Kind, namespace string, r Report[R]) (*corev1.ConfigMap, error) {
	data := map[string]string{NodeKey: r.Node, StageKey: string(r.Stage)}
	if r.Addr.IsValid() {
		data[AddrKey] = r.Addr.String()
	}
	if r.Error != "" {
		data[ErrorKey] = Truncate(r.Error, maxError)
	}
	if r.Stage == Done && r.Error == "" {
		result, err := json.Marshal(r.Result)
		if err != nil {
			return nil, fmt.Errorf("encoding the report of %s: %w", r.Node, err)
		}
		data[ResultKey] = string(result)
	}
	labels := map[string]string{ComponentLabel: k.Component, ReportLabel: string(r.Round)}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: k.ReportName(r.Node), Labels: labels}, Data: data}, nil
}

// DecodeReport reads a report's ConfigMap. A report whose result cannot be
// read is kept, as Done with the error.
func DecodeReport[R any](cm *corev1.ConfigMap) Report[R] {
	d := cm.Data
	r := Report[R]{Round: ID(cm.Labels[ReportLabel]), Node: d[NodeKey], Stage: ReportStage(d[StageKey]), Error: d[ErrorKey]}
	r.Addr, _ = netip.ParseAddr(d[AddrKey])
	if r.Stage == Done && r.Error == "" {
		if err := json.Unmarshal([]byte(d[ResultKey]), &r.Result); err != nil {
			r.Error = "unreadable report: " + err.Error()
		}
	}
	// An agent writes its report itself: its error is bounded here too.
	r.Error = Truncate(r.Error, maxError)
	return r
}
