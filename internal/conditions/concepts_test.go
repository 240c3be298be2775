package conditions

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const concepts = "../../docs/concepts.md"

// conditionTypes are the conditions winready writes.
var conditionTypes = []string{
	Ready, Reconciling, Stalled, PreflightPassed, RollbackAllowed, CalicoHealthy, DirectAPIServerAddress,
	OriginalsRecorded, CalicoNodeManaged, WindowsNodesHealthy,
}

// event stands, in an "on" set, for the reason of an Event.
const event = "Event"

// summaryOf is what each effect does to Ready, Reconciling and Stalled, as
// the reconciler's conclusion writes them: the conditions it is the reason of.
var summaryOf = map[Effect][]string{
	Stalls:    {Stalled},
	Waits:     {Reconciling},
	Holds:     {Reconciling},
	Completes: {Ready},
	Rests:     {Ready, Reconciling, Stalled},
	Informs:   nil,
}

// setOnNone are the reasons of the catalogue that winready sets on no
// condition and in no Event today: none; a reason nothing sets is removed.
var setOnNone = map[string]bool{}

// reasonRow is a row of docs/concepts.md's table of reasons.
type reasonRow struct {
	reasons []string
	cell    string
	on      []string
}

// conceptsReasons reads the table of reasons of docs/concepts.md.
func conceptsReasons(t *testing.T) []reasonRow {
	t.Helper()
	data, err := os.ReadFile(concepts)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "\n| reason | on | what to do |\n")
	if !ok {
		t.Fatal("docs/concepts.md has no table `| reason | on | what to do |`")
	}
	code := regexp.MustCompile("`([^`]+)`")
	var rows []reasonRow
	for i, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i == 0 {
			continue // the separator
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs/concepts.md, a row of reasons without 3 cells: %s", line)
		}
		row := reasonRow{cell: cells[0]}
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			row.reasons = append(row.reasons, m[1])
		}
		if cells[1] != "none" {
			for _, c := range strings.Split(cells[1], ",") {
				row.on = append(row.on, strings.TrimSpace(c))
			}
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("docs/concepts.md's table of reasons has no row: the pattern is wrong")
	}
	return rows
}

// troubleshootingOn is, for each reason entry of docs/troubleshooting.md,
// the conditions its first paragraph's lead (up to the first ':' or '.'
// outside code) names, and Event when the lead names one: "`Stalled` and
// `PreflightPassed=False`: ..." gives Stalled and PreflightPassed.
func troubleshootingOn(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(troubleshooting)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	sections := strings.Split(string(data), "\n### ")
	for _, sec := range sections[1:] {
		heading, body, _ := strings.Cut(sec, "\n")
		if _, ok := catalogue[heading]; !ok {
			continue
		}
		para, _, _ := strings.Cut(strings.TrimLeft(body, "\n"), "\n\n")
		out[heading] = namedIn(lead(strings.TrimPrefix(para, "**Symptom**: ")))
	}
	return out
}

// lead is text up to its first ':' or '.' that ends a clause (followed by
// white space or the end) outside `code`.
func lead(text string) string {
	inCode := false
	for i, r := range text {
		switch {
		case r == '`':
			inCode = !inCode
		case !inCode && (r == ':' || r == '.') && (i+1 == len(text) || strings.ContainsRune(" \n", rune(text[i+1]))):
			return text[:i]
		}
	}
	return text
}

// namedIn is the conditions a lead names in code (`Stalled`,
// `PreflightPassed=False`), and Event when it names one; none for a lead
// that is "none".
func namedIn(lead string) []string {
	var on []string
	if strings.TrimSpace(lead) == "none" {
		return on
	}
	for _, m := range regexp.MustCompile("`([A-Za-z]+)(=[A-Za-z]+)?`").FindAllStringSubmatch(lead, -1) {
		if slices.Contains(conditionTypes, m[1]) && !slices.Contains(on, m[1]) {
			on = append(on, m[1])
		}
	}
	if regexp.MustCompile(`\bEvent\b`).MatchString(lead) {
		on = append(on, event)
	}
	return on
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// TestConceptsListsEveryReasonAsTroubleshootingDoes fails when
// docs/concepts.md's table of reasons lacks a reason of the catalogue, names
// one the catalogue does not know, does not link it to its troubleshooting
// entry, or puts it on other conditions than docs/troubleshooting.md's entry
// names or than its effect writes.
func TestConceptsListsEveryReasonAsTroubleshootingDoes(t *testing.T) {
	rows := conceptsReasons(t)
	fromTroubleshooting := troubleshootingOn(t)
	seen := map[string]bool{}
	for _, row := range rows {
		if len(row.reasons) == 0 {
			t.Errorf("docs/concepts.md: a row of reasons names none: %s", row.cell)
		}
		for _, on := range row.on {
			if on != event && !slices.Contains(conditionTypes, on) {
				t.Errorf("docs/concepts.md: %v on %q, which is no condition of winready's (nor Event)", row.reasons, on)
			}
		}
		for _, reason := range row.reasons {
			effect, ok := catalogue[reason]
			if !ok {
				t.Errorf("docs/concepts.md lists %s, which the catalogue lacks", reason)
				continue
			}
			if seen[reason] {
				t.Errorf("docs/concepts.md lists %s twice", reason)
			}
			seen[reason] = true
			if link := "[`" + reason + "`](troubleshooting.md#" + anchor(reason) + ")"; !strings.Contains(row.cell, link) {
				t.Errorf("docs/concepts.md: %s is not linked to its entry, %s", reason, link)
			}
			got := sortedSet(row.on)
			if want, ok := fromTroubleshooting[reason]; ok && !slices.Equal(got, sortedSet(want)) {
				t.Errorf("%s: docs/concepts.md has it on %v, docs/troubleshooting.md's entry on %v", reason, got, sortedSet(want))
			}
			summary := slices.DeleteFunc(slices.Clone(got), func(c string) bool {
				return c != Ready && c != Reconciling && c != Stalled
			})
			want := sortedSet(summaryOf[effect])
			if setOnNone[reason] {
				want = nil
				if len(got) > 0 {
					t.Errorf("%s is set on nothing, docs/concepts.md has it on %v", reason, got)
				}
			}
			if !slices.Equal(summary, want) {
				t.Errorf("%s: docs/concepts.md has it on %v of Ready, Reconciling and Stalled; its effect writes it on %v",
					reason, summary, want)
			}
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(catalogue)) {
		if !seen[reason] {
			t.Errorf("docs/concepts.md's table of reasons lacks %s", reason)
		}
	}
}

// TestConceptsListsEveryCondition fails on a condition winready writes that
// docs/concepts.md's table of conditions has no row for.
func TestConceptsListsEveryCondition(t *testing.T) {
	data, err := os.ReadFile(concepts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conditionTypes {
		if !strings.Contains(string(data), "\n| `"+c+"` | ") {
			t.Errorf("docs/concepts.md's table of conditions has no row `%s`", c)
		}
	}
}

// TestLeadNamesTheConditions pins how an entry's lead is read.
func TestLeadNamesTheConditions(t *testing.T) {
	for text, want := range map[string][]string{
		"`Stalled` and `PreflightPassed=False`, message `preflight failed, nothing was changed: ...` naming: the rest": {Stalled, PreflightPassed},
		"`Reconciling=True`: a read failed; such errors never become `Stalled`":                                        {Reconciling},
		"`Stalled`. Either `Reconciling`":                                     {Stalled},
		"`WindowsNodesHealthy=False`, and a Warning Event naming the node: x": {WindowsNodesHealthy, event},
		"Normal Event: a step started":                                        {event},
		"none: a reason of the catalogue that winready sets on no condition.": nil,
		"`Ready`, `Reconciling` and `Stalled` False, phase `Planned`: x":      {Ready, Reconciling, Stalled},
	} {
		if got := namedIn(lead(text)); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
}
