package main

import (
	"strings"
	"time"

	"github.com/winready/winready/test/auditlog"
)

// Reading the API server's audit log: whose requests, which writes, and how
// long from a WindowsReadiness event to the patch that follows it.

// auditPolicy records winready's and the runbook's every request, and the
// simulator's writes, with their timestamps; the ConfigMaps that winready and
// the agents write in the probe namespace with their content, for their size.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Request
  users: ["winready", "agents"]
  verbs: ["create", "update", "patch"]
  namespaces: ["winready-probe"]
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
  users: ["winready", "runbook", "agents"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
- level: None
`

// simUserAgent tells the simulated Calico's requests apart in the audit log:
// it runs as the control plane's admin, as the bench's own client does.
const simUserAgent = "calicosim"

type auditEvent = auditlog.Event

func requestsBy(events []auditEvent, user string) map[string]int {
	counts := map[string]int{}
	for _, ev := range events {
		if ev.User.Username != user {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		counts[ev.Verb+" "+res]++
	}
	return counts
}

// eventToPatch is, for each change winready makes to Calico after its
// first, the time from the simulated Calico's last status report that ended
// before the change was received (the report that let the previous step
// finish: a TigeraStatus, the Installation's status, calico-node's rollout)
// to the change. The log is in the order requests completed, so a report
// that ended while the change was in flight comes before it and is passed
// over. Each report answers one change at most: the rest of a batch answer
// the same report, and a change with no report since the last one paired
// was not waiting for Calico.
func eventToPatch(events []auditEvent) []time.Duration {
	var lat []time.Duration
	var reports []*auditEvent // the simulator's status writes, in the log's order
	paired := -1              // the last report paired with a change
	changed := false          // whether winready made its first change
	for i := range events {
		ev := &events[i]
		if !isWrite(ev.Verb) || ev.ResponseStatus.Code >= 300 {
			continue
		}
		switch {
		case strings.HasPrefix(ev.UserAgent, simUserAgent) && ev.ObjectRef.Subresource == "status":
			reports = append(reports, ev)
		case ev.User.Username == "winready" && calicoResource(ev):
			last := len(reports) - 1
			for last > paired && !reports[last].Done.Before(&ev.Received) {
				last--
			}
			if changed && last > paired {
				lat = append(lat, ev.Received.Sub(reports[last].Done.Time))
			}
			changed, paired = true, max(paired, last)
		}
	}
	return lat
}

func isWrite(verb string) bool {
	return verb == "create" || verb == "update" || verb == "patch" || verb == "delete"
}

func calicoResource(ev *auditEvent) bool {
	switch ev.ObjectRef.Resource {
	case "installations", "ipamconfigurations":
		return ev.ObjectRef.Subresource == ""
	case "configmaps":
		return ev.ObjectRef.Namespace == "tigera-operator"
	}
	return false
}
