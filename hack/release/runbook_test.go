package main

import (
	"bytes"
	"regexp"
	"testing"
)

// TestRunbooksPointAtTheReleaseTag: every alert a release ships opens the
// troubleshooting guide as it was at that release; a build that is no
// release keeps the main branch's.
func TestRunbooksPointAtTheReleaseTag(t *testing.T) {
	runbook := regexp.MustCompile(`runbook_url: (\S+)`)
	for version, want := range map[string]string{
		"v0.1.0":      "https://github.com/winready/winready/blob/v0.1.0/docs/troubleshooting.md#",
		"v0.2.0-rc.1": "https://github.com/winready/winready/blob/v0.2.0-rc.1/docs/troubleshooting.md#",
		"dev":         "https://github.com/winready/winready/blob/main/docs/troubleshooting.md#",
	} {
		rules, err := buildPrometheus("../../config", version)
		if err != nil {
			t.Fatal(err)
		}
		urls := runbook.FindAllSubmatch(rules, -1)
		if len(urls) == 0 {
			t.Fatalf("%s: config/prometheus has no runbook_url", version)
		}
		for _, u := range urls {
			if !bytes.HasPrefix(u[1], []byte(want)) {
				t.Errorf("%s: runbook_url %s, want one under %s", version, u[1], want)
			}
		}
	}
}
