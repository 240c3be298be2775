package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

// The tree kubectl winready status prints of a WindowsReadiness, with its
// last Events.

// print writes the WindowsReadiness with printer, or as the tree when
// printer is nil.
func (o *options) print(ctx context.Context, c client.Client, wr *v1alpha1.WindowsReadiness, printer printers.ResourcePrinter) error {
	if printer != nil {
		return printer.PrintObj(wr, o.streams.Out)
	}
	events, err := lastEvents(ctx, c, wr)
	if err != nil {
		return err
	}
	describe(o.streams.Out, wr, events, o.now(), o.showAll)
	return nil
}

// shownEvents is how many of the latest Events status shows.
const shownEvents = 5

// lastEvents are the latest Events about the WindowsReadiness, oldest first.
// Events of a cluster-scoped object live in namespace default.
func lastEvents(ctx context.Context, c client.Client, wr *v1alpha1.WindowsReadiness) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(corev1.NamespaceDefault),
		client.MatchingFields{"regarding.kind": "WindowsReadiness", "regarding.name": wr.Name}); err != nil {
		return nil, fmt.Errorf("listing the Events of WindowsReadiness %s: %w", wr.Name, request("list", "events.events.k8s.io", err))
	}
	out := list.Items
	slices.SortFunc(out, func(a, b eventsv1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return out[max(len(out)-shownEvents, 0):], nil
}

func eventTime(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.DeprecatedLastTimestamp.Time
}

// tree writes clusterctl-describe-style lines, two levels deep.
type tree struct {
	w io.Writer
	// sectionLast is whether the section being written is the last one.
	sectionLast bool
}

func (t *tree) line(depth int, last bool, format string, a ...any) {
	prefix := ""
	switch depth {
	case 1:
		t.sectionLast = last
	case 2:
		prefix = "│  "
		if t.sectionLast {
			prefix = "   "
		}
	}
	if depth > 0 {
		if last {
			prefix += "└─ "
		} else {
			prefix += "├─ "
		}
	}
	fmt.Fprintln(t.w, strings.TrimRight(fmt.Sprintf(prefix+format, a...), " "))
}

// describe writes the WindowsReadiness as a tree, durations counted to now.
// Unless showAll, the preflight checks that pass and the completed steps
// are one line each (when there are two or more), as clusterctl describe
// folds what is ready: what fails, warns or is under way stays in full.
func describe(w io.Writer, wr *v1alpha1.WindowsReadiness, events []eventsv1.Event, now time.Time, showAll bool) {
	t := &tree{w: w}
	st := wr.Status
	t.line(0, false, "WindowsReadiness/%s  direction %s  phase %s  generation %d (observed %d)",
		wr.Name, wr.Spec.Direction, orNone(string(st.Phase)), wr.Generation, st.ObservedGeneration)
	if st.Message != "" {
		t.line(1, false, "Message: %s", st.Message)
	}
	// A section's line names its columns; a row is three characters deeper.
	t.line(1, false, "%-25s %-6s %-24s %-5s %s", "Conditions", "STATUS", "REASON", "SINCE", "MESSAGE")
	for i, c := range st.Conditions {
		t.line(2, i == len(st.Conditions)-1, "%-22s %-6s %-24s %-5s %s", c.Type, c.Status, c.Reason,
			since(&c.LastTransitionTime, now), c.Message)
	}
	t.line(1, false, "%-25s %-10s %-8s %-5s %-7s %s", "Steps", "STATE", "TOOK", "SINCE", "CHANGED", "MESSAGE")
	rows := stepRows(st.Steps, now, showAll)
	for i, r := range rows {
		t.line(2, i == len(rows)-1, "%-22s %-10s %-8s %-5s %-7s %s", r...)
	}
	if r := st.Rollout; r != nil {
		pace, left := "pace unknown", "time left unknown"
		if r.PacePerNode != nil {
			pace = r.PacePerNode.Duration.Round(time.Second).String() + "/node"
		}
		if r.EstimatedTimeLeft != nil {
			left = r.EstimatedTimeLeft.Duration.Round(time.Second).String() + " left"
		}
		t.line(1, false, "Rollout %s: %d/%d updated, %d unavailable, %s, %s", r.DaemonSet, r.Updated, r.Total, r.Unavailable, pace, left)
	}
	if c := st.Canary; c != nil {
		describeCanary(t, c)
	}
	if pf := st.Preflight; pf != nil {
		t.line(1, false, "%-25s %-6s %-5s %s", "Preflight", "RESULT", "SINCE", "MESSAGE")
		rows := checkRows(pf, now, showAll)
		for i, r := range rows {
			t.line(2, i == len(rows)-1, "%-22s %-6s %-5s %s", r...)
		}
	}
	t.line(1, false, "Windows nodes")
	if len(st.WindowsNodeJoins) == 0 {
		t.line(2, true, "none has joined")
	}
	for i, j := range st.WindowsNodeJoins {
		waiting := ""
		if j.WaitingFor != "" {
			waiting = "waiting for " + j.WaitingFor
		}
		t.line(2, i == len(st.WindowsNodeJoins)-1, "%-20s %-8s %s", j.Name, j.State, waiting)
	}
	t.line(1, true, "Events (latest %d)", shownEvents)
	if len(events) == 0 {
		t.line(2, true, "none")
	}
	for i, e := range events {
		t.line(2, i == len(events)-1, "%-8s %-7s %-20s %s ago: %s", e.Type, e.Action, e.Reason,
			now.Sub(eventTime(e)).Round(time.Second), e.Note)
	}
}

// stepRows are the columns of each step: name, state, how long it took, since
// when it is in its state, whether it changed the cluster, the message.
// Unless showAll, two or more completed steps are one row, where the first
// of them was.
func stepRows(steps []v1alpha1.StepStatus, now time.Time, showAll bool) [][]any {
	var done []v1alpha1.StepStatus
	for _, s := range steps {
		if s.State == v1alpha1.StepCompleted {
			done = append(done, s)
		}
	}
	fold := !showAll && len(done) >= 2
	var rows [][]any
	for _, s := range steps {
		if fold && s.State == v1alpha1.StepCompleted {
			if s.Name == done[0].Name {
				rows = append(rows, completedRow(done, now))
			}
			continue
		}
		changed := ""
		if s.Changed {
			changed = "yes"
		}
		rows = append(rows, []any{s.Name, s.State, stepDuration(s, now), since(stepSince(s), now), changed, s.Message})
	}
	return rows
}

// completedRow is the one row of the completed steps: their time together,
// since the last finished, how many changed the cluster, their names.
func completedRow(done []v1alpha1.StepStatus, now time.Time) []any {
	var took time.Duration
	var last *metav1.Time
	changed := 0
	names := make([]string, len(done))
	for i, s := range done {
		names[i] = string(s.Name)
		if s.StartedAt != nil && s.FinishedAt != nil {
			took += s.FinishedAt.Sub(s.StartedAt.Time)
		}
		if s.FinishedAt != nil && (last == nil || s.FinishedAt.After(last.Time)) {
			last = s.FinishedAt
		}
		if s.Changed {
			changed++
		}
	}
	return []any{fmt.Sprintf("%d steps completed", len(done)), v1alpha1.StepCompleted, took.Round(time.Second).String(),
		since(last, now), fmt.Sprintf("%d of %d", changed, len(done)), strings.Join(names, ", ")}
}

// stepSince is when the step got to its state: when it finished, else
// when it started.
func stepSince(s v1alpha1.StepStatus) *metav1.Time {
	if s.FinishedAt != nil {
		return s.FinishedAt
	}
	return s.StartedAt
}

// checkRows are the columns of each preflight check: name, result, since
// when the checks show these results, the message. Unless showAll, two or
// more checks that pass are one row, after the others.
func checkRows(pf *v1alpha1.PreflightStatus, now time.Time, showAll bool) [][]any {
	at := since(pf.CompletedAt, now)
	passed := 0
	for _, c := range pf.Checks {
		if c.Result == v1alpha1.CheckPass {
			passed++
		}
	}
	fold := !showAll && passed >= 2
	var rows [][]any
	for _, c := range pf.Checks {
		if fold && c.Result == v1alpha1.CheckPass {
			continue
		}
		rows = append(rows, []any{c.Name, c.Result, at, c.Message})
	}
	if fold {
		rows = append(rows, []any{fmt.Sprintf("%d checks passed", passed), v1alpha1.CheckPass, at, ""})
	}
	return rows
}

// since is how long ago t was, as kubectl prints ages; "-" when unknown.
func since(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func stepDuration(s v1alpha1.StepStatus, now time.Time) string {
	if s.StartedAt == nil {
		return "-"
	}
	end := now
	if s.FinishedAt != nil {
		end = s.FinishedAt.Time
	}
	return end.Sub(s.StartedAt.Time).Round(time.Second).String()
}

func orNone(s string) string {
	if s == "" {
		return "(none yet)"
	}
	return s
}

// describeCanary writes the canary of the last rollout: its state, its
// nodes, and the failing pairs of its check.
func describeCanary(t *tree, c *v1alpha1.CanaryStatus) {
	steps := make([]string, len(c.Steps))
	for i, s := range c.Steps {
		steps[i] = string(s)
	}
	t.line(1, false, "Canary of %s (%s): %s, %d nodes", strings.Join(steps, ", "), c.Direction, c.State, c.Size)
	var rows []string
	if len(c.Nodes) > 0 {
		rows = append(rows, "nodes: "+strings.Join(c.Nodes, ", "))
	}
	if rd := c.Round; rd != nil {
		for _, f := range rd.Failing {
			rows = append(rows, fmt.Sprintf("%s -> %s  %s  %s", f.From, f.To, f.Verdict, f.Checks))
		}
		if rd.Diagnosis != "" {
			rows = append(rows, rd.Diagnosis)
		}
	}
	for i, r := range rows {
		t.line(2, i == len(rows)-1, "%s", r)
	}
}
