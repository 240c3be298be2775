package prometheus

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// runbookBase is where every alert's runbook lives: an entry of
// docs/troubleshooting.md on the main branch.
const runbookBase = "https://github.com/winready/winready/blob/main/docs/troubleshooting.md#"

// anchor is the id GitHub gives a Markdown heading: lowercased, spaces to
// '-', punctuation other than '-' and '_' dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the ids of the headings of the Markdown file path, with
// GitHub's -1, -2 ... for repeated ones; fenced code is not looked in.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out, seen := map[string]bool{}, map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		text := strings.TrimLeft(line, "#")
		if fenced || text == line || !strings.HasPrefix(text, " ") {
			continue
		}
		id := anchor(text)
		if n := seen[id]; n > 0 {
			out[id+"-"+strconv.Itoa(n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAnchorFollowsGitHub(t *testing.T) {
	for heading, want := range map[string]string{
		"WinreadyStalled":                                      "winreadystalled",
		"What deleting the WindowsReadiness does":              "what-deleting-the-windowsreadiness-does",
		"kube-prometheus-stack selects by its `release` label": "kube-prometheus-stack-selects-by-its-release-label",
		"The `overlay` Installation":                           "the-overlay-installation",
		"Completes and Rests":                                  "completes-and-rests",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestEveryAlertHasARunbook: each alert's runbook_url is its entry in
// docs/troubleshooting.md, a heading that exists there.
func TestEveryAlertHasARunbook(t *testing.T) {
	headings := anchors(t, "../../docs/troubleshooting.md")
	alerts := 0
	for name, r := range rules(t) {
		if r.Alert == "" {
			continue
		}
		alerts++
		url := r.Annotations["runbook_url"]
		id, ok := strings.CutPrefix(url, runbookBase)
		switch {
		case !ok:
			t.Errorf("alert %s: runbook_url %q is not an entry of %s", name, url, runbookBase)
		case !headings[id]:
			t.Errorf("alert %s: runbook_url %q: docs/troubleshooting.md has no heading #%s", name, url, id)
		}
	}
	if alerts == 0 {
		t.Fatal("no alert in config/prometheus/prometheusrule.yaml")
	}
}
