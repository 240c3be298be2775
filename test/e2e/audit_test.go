package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/gomega"

	"github.com/winready/winready/test/auditlog"
)

// auditEvent is what the timing scenario reads of an audit log line.
type auditEvent = auditlog.Event

// auditSize marks where the audit log is now: readAudit reads from there.
func auditSize(b *realBackend) int64 {
	size, err := auditlog.Size(b.auditLog())
	Expect(err).NotTo(HaveOccurred())
	return size
}

// readAudit reads the accepted writes the audit log recorded between two
// marks (to 0: up to its end).
func readAudit(b *realBackend, from, to int64) []auditEvent {
	all, err := auditlog.Read(b.auditLog(), from, to)
	Expect(err).NotTo(HaveOccurred())
	return slices.DeleteFunc(all, func(ev auditEvent) bool { return ev.ResponseStatus.Code >= 300 })
}

// operatorNamespace is where winready runs.
const operatorNamespace = "winready-system"

// byWinready: the manager runs as its ServiceAccount in winready-system.
func byWinready(ev *auditEvent) bool {
	return strings.HasPrefix(ev.User.Username, "system:serviceaccount:"+operatorNamespace+":")
}

// changesCalico is a write of winready's to what Calico reads: the
// Installation (its spec and the hold's mark), the IPAM configuration, the
// services-endpoint ConfigMap and calico-node's hold annotation.
func changesCalico(ev *auditEvent) bool {
	switch ev.ObjectRef.Resource {
	case "installations", "ipamconfigurations":
		return ev.ObjectRef.Subresource == ""
	case "configmaps":
		return ev.ObjectRef.Namespace == "tigera-operator"
	case "daemonsets":
		return ev.ObjectRef.Namespace == "calico-system" && ev.ObjectRef.Subresource == ""
	}
	return false
}

// reportsCalico is a write by Calico or a controller of what winready waits
// on: TigeraStatus, the Installation's status (status.computed), IPPools,
// and calico-system's DaemonSets (template and rollout) and Deployments
// (calico-typha's template). The operator's patches of the Installation
// spec (its defaults) are left out: they answer no wait.
func reportsCalico(ev *auditEvent) bool {
	switch ev.ObjectRef.Resource {
	case "tigerastatuses", "ippools":
		return true
	case "installations":
		return ev.ObjectRef.Subresource == "status"
	case "daemonsets", "deployments":
		return ev.ObjectRef.Namespace == "calico-system"
	}
	return false
}

// gap is the time from a report of Calico to winready's next change.
type gap struct {
	Delay          time.Duration
	Report, Change *auditEvent
}

func (g gap) String() string {
	desc := func(ev *auditEvent) string {
		r := ev.ObjectRef
		what := r.Resource
		if r.Subresource != "" {
			what += "/" + r.Subresource
		}
		return fmt.Sprintf("%s %s %s (%s)", ev.Verb, what, r.Name, ev.Done.UTC().Format("15:04:05.000"))
	}
	return fmt.Sprintf("%6dms from %s by %s to %s", g.Delay.Milliseconds(), desc(g.Report), strings.Fields(g.Report.UserAgent + " ?")[0], desc(g.Change))
}

// eventToWrite is, for each change winready makes to Calico after its first
// (which follows the preflight, or the spec's change to a rollback), the time to it from the last report of
// Calico completed before it, when that report came after winready's
// previous change (so the change waited for Calico, not for a write of its
// own). When several reports came, the one that ended the wait may have been
// an earlier one: each figure is at most the true delay.
func eventToWrite(events []auditEvent) []gap {
	writes := func(ev *auditEvent) bool {
		return ev.Verb == "create" || ev.Verb == "update" || ev.Verb == "patch" || ev.Verb == "delete"
	}
	var gaps []gap
	var previous *auditEvent // winready's previous change
	for i := range events {
		w := &events[i]
		if !writes(w) || !byWinready(w) || !changesCalico(w) {
			continue
		}
		var report *auditEvent
		for j := range events {
			r := &events[j]
			if writes(r) && !byWinready(r) && reportsCalico(r) && r.Done.Before(&w.Received) &&
				(previous == nil || previous.Done.Before(&r.Done)) && (report == nil || report.Done.Before(&r.Done)) {
				report = r
			}
		}
		if previous != nil && report != nil {
			gaps = append(gaps, gap{Delay: w.Received.Sub(report.Done.Time), Report: report, Change: w})
		}
		previous = w
	}
	return gaps
}

// percentile is auditlog's, to the millisecond.
func percentile(d []time.Duration, p int) time.Duration {
	return auditlog.Percentile(d, p).Round(time.Millisecond)
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
