package controllers_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The API server's audit log is the one count of writes that a crash cannot
// blur: a request cancelled by a stopping manager may still have been applied.

const operatorUserAgent = "winready-under-test"

// auditPolicy records every write at Metadata level when it is received and
// when it completes. A request whose client went away mid-flight (a manager
// stopped by the restart tests) may never log its completion, though the
// server applied it: such a request counts as a write.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
- level: None
`

// enableAudit makes the API server write its audit log into dir.
func enableAudit(env *envtest.Environment, dir string) string {
	policy := filepath.Join(dir, "audit-policy.yaml")
	Expect(os.WriteFile(policy, []byte(auditPolicy), 0o600)).To(Succeed())
	logPath := filepath.Join(dir, "audit.log")
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", logPath)
	args.Set("audit-log-mode", "blocking")
	return logPath
}

var auditLog string

type auditEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// appliedWrites counts the writes by winready that the API server accepted,
// keyed "<resource> [<namespace>] <verb>", leaving out its own
// WindowsReadiness.
func appliedWrites() map[string]int {
	accepted, _ := auditedWrites()
	return accepted
}

// auditedWrites counts winready's writes in the audit log: those the API
// server accepted, and those whose outcome the log cannot tell: no response
// yet, or a server error, which a manager stopped in the middle of a request
// sees even when storage had already committed the write.
func auditedWrites() (accepted, unsure map[string]int) {
	f, err := os.Open(auditLog)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	received := map[string]string{} // auditID to key, in order of arrival
	var order []string
	code := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a line still being written
		}
		if !strings.HasPrefix(ev.UserAgent, operatorUserAgent) ||
			ev.ObjectRef.Resource == "windowsreadinesses" || ev.ObjectRef.Resource == "events" || ev.ObjectRef.Resource == "leases" {
			continue
		}
		switch ev.Stage {
		case "RequestReceived":
			key := ev.ObjectRef.Resource + " " + ev.Verb
			if ev.ObjectRef.Namespace != "" {
				key = ev.ObjectRef.Resource + " " + ev.ObjectRef.Namespace + " " + ev.Verb
			}
			received[ev.AuditID] = key
			order = append(order, ev.AuditID)
		case "ResponseComplete":
			code[ev.AuditID] = ev.ResponseStatus.Code
		case "Panic":
			code[ev.AuditID] = 500
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	accepted, unsure = map[string]int{}, map[string]int{}
	for _, id := range order {
		switch c, done := code[id]; {
		case done && c < 300:
			accepted[received[id]]++
		case !done || c >= 500:
			unsure[received[id]]++
		}
	}
	return accepted, unsure
}

// appliedWritesSince returns a function that counts the writes accepted
// since baseline was taken.
func appliedWritesSince(baseline map[string]int) func() map[string]int {
	return func() map[string]int { return subtract(appliedWrites(), baseline) }
}

// subtract is counts less baseline, without the keys that reach zero.
func subtract(counts, baseline map[string]int) map[string]int {
	for k, v := range baseline {
		if counts[k] -= v; counts[k] == 0 {
			delete(counts, k)
		}
	}
	return counts
}

// calicoOnly keeps the counts of writes to what Calico reads: the
// Installation, the IPAM configuration and the ConfigMaps of tigera-operator;
// not the gate nor the probe rounds in winready's own namespace.
func calicoOnly(counts map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range counts {
		f := strings.Fields(k)
		switch {
		case f[0] == "Installation", f[0] == "installations", f[0] == "IPAMConfiguration", f[0] == "ipamconfigurations",
			len(f) == 3 && (f[1] == "tigera-operator" || f[1] == "calico-system"):
			out[k] = v
		}
	}
	return out
}
