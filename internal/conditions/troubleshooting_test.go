package conditions

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

const troubleshooting = "../../docs/troubleshooting.md"

// headings are the texts of the `### ` headings of the Markdown file path,
// outside fenced code.
func headings(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if text, ok := strings.CutPrefix(line, "### "); ok && !fenced {
			out = append(out, strings.TrimSpace(text))
		}
	}
	return out
}

// TestTroubleshootingCoversEveryReason fails on a reason of the catalogue
// that docs/troubleshooting.md has no `### <Reason>` entry for: the doc is
// the index by reason that the alerts' runbook_url and people look up.
func TestTroubleshootingCoversEveryReason(t *testing.T) {
	entries := headings(t, troubleshooting)
	if len(catalogue) == 0 {
		t.Fatal("the catalogue is empty")
	}
	for reason := range catalogue {
		if !slices.Contains(entries, reason) {
			t.Errorf("docs/troubleshooting.md has no entry `### %s`", reason)
		}
	}
}

// anchor is the id GitHub gives a heading: lowercased, spaces to '-',
// punctuation other than '-' and '_' dropped.
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

// TestTroubleshootingLinksHold fails on a link within
// docs/troubleshooting.md to a heading it does not have: the entries point
// at each other by reason.
func TestTroubleshootingLinksHold(t *testing.T) {
	data, err := os.ReadFile(troubleshooting)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for line := range strings.Lines(string(data)) {
		if text := strings.TrimLeft(line, "#"); text != line && strings.HasPrefix(text, " ") {
			ids[anchor(text)] = true
		}
	}
	links := regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(string(data), -1)
	if len(links) == 0 {
		t.Fatal("no link within docs/troubleshooting.md: the pattern is wrong")
	}
	for _, m := range links {
		if !ids[m[1]] {
			t.Errorf("docs/troubleshooting.md links to #%s, which is none of its headings", m[1])
		}
	}
}
