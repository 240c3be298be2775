package controllers_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	. "github.com/onsi/gomega"

	"github.com/winready/winready/test/kit"
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
func enableAudit(env *kit.Env, dir string) string {
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
	audit.mu.Lock()
	defer audit.mu.Unlock()
	audit.readNew()
	accepted, unsure = map[string]int{}, map[string]int{}
	for _, id := range audit.order {
		switch c, done := audit.code[id]; {
		case done && c < 300:
			accepted[audit.received[id]]++
		case !done || c >= 500:
			unsure[audit.received[id]]++
		}
	}
	return accepted, unsure
}

// audit is what the audit log said of winready's writes so far.
var audit = &auditTail{received: map[string]string{}, code: map[string]int{}}

// auditTail follows the audit log. The log holds every write of the suite
// and specs poll it, so each look reads only the lines added since the last.
type auditTail struct {
	mu sync.Mutex
	// offset is where the next unread line starts.
	offset   int64
	received map[string]string // auditID to key
	order    []string          // auditIDs in order of arrival
	code     map[string]int
}

// readNew reads the complete lines added to the log since the last look; a
// line still being written is left for the next.
func (a *auditTail) readNew() {
	f, err := os.Open(auditLog)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	_, err = f.Seek(a.offset, io.SeekStart)
	Expect(err).NotTo(HaveOccurred())
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return
		}
		Expect(err).NotTo(HaveOccurred())
		a.offset += int64(len(line))
		// Most lines are other clients' writes: skip them unparsed.
		if !bytes.Contains(line, []byte(operatorUserAgent)) {
			continue
		}
		a.add(line)
	}
}

// add records one audit event of winready's.
func (a *auditTail) add(line []byte) {
	var ev auditEvent
	Expect(json.Unmarshal(line, &ev)).To(Succeed())
	if !strings.HasPrefix(ev.UserAgent, operatorUserAgent) ||
		ev.ObjectRef.Resource == "windowsreadinesses" || ev.ObjectRef.Resource == "events" || ev.ObjectRef.Resource == "leases" {
		return
	}
	switch ev.Stage {
	case "RequestReceived":
		key := ev.ObjectRef.Resource + " " + ev.Verb
		if ev.ObjectRef.Namespace != "" {
			key = ev.ObjectRef.Resource + " " + ev.ObjectRef.Namespace + " " + ev.Verb
		}
		a.received[ev.AuditID] = key
		a.order = append(a.order, ev.AuditID)
	case "ResponseComplete":
		a.code[ev.AuditID] = ev.ResponseStatus.Code
	case "Panic":
		a.code[ev.AuditID] = 500
	}
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
