package plugin

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/round"
)

// TestRetryAndRerunAskAgainEachRun: each run sets the annotation to a value
// the manager reads as a new request (another round.TokenOf), as field
// manager kubectl-winready, and changes nothing else.
func TestRetryAndRerunAskAgainEachRun(t *testing.T) {
	seed(t)
	var outs strings.Builder
	for _, tc := range []struct {
		args       []string
		annotation string
	}{
		{[]string{"retry"}, v1alpha1.RetryAnnotation},
		{[]string{"rerun", "preflight"}, v1alpha1.RerunPreflightAnnotation},
		{[]string{"rerun", "PodCheck"}, v1alpha1.RerunPodCheckAnnotation},
	} {
		before := getWR(t)
		var tokens []round.Token
		for range 3 {
			code, stdout, stderr := runCode(t, tc.args...)
			fmt.Fprintf(&outs, "$ kubectl winready %s\nexit %d\n%s%s", strings.Join(tc.args, " "), code, stdout, stderr)
			if code != 0 {
				t.Fatalf("%v: exit status %d; stderr:\n%s", tc.args, code, stderr)
			}
			wr := getWR(t)
			value := wr.Annotations[tc.annotation]
			token := round.TokenOf(value)
			if token == "" || slices.Contains(tokens, token) {
				t.Errorf("%v: annotation %s=%q is no new request (tokens before: %v)", tc.args, tc.annotation, value, tokens)
			}
			tokens = append(tokens, token)
			if !strings.Contains(stdout, "patched: annotation "+tc.annotation+"="+value+"\n") {
				t.Errorf("%v printed %q, not the value set (%s)", tc.args, stdout, value)
			}
			if wr.Generation != before.Generation {
				t.Errorf("%v changed the spec: generation %d, was %d", tc.args, wr.Generation, before.Generation)
			}
			if !slices.ContainsFunc(wr.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
				return m.Manager == FieldManager && strings.Contains(m.FieldsV1.GetRawString(), `"f:`+tc.annotation+`"`)
			}) {
				t.Errorf("annotation %s is not managed by %s: %v", tc.annotation, FieldManager, wr.ManagedFields)
			}
		}
		for _, other := range []string{v1alpha1.RetryAnnotation, v1alpha1.RerunPreflightAnnotation, v1alpha1.RerunPodCheckAnnotation} {
			if other != tc.annotation && getWR(t).Annotations[other] != before.Annotations[other] {
				t.Errorf("%v changed annotation %s too", tc.args, other)
			}
		}
	}
	golden(t, "retry-rerun", outs.String())
}

func TestFreshValueIsNewOnAStoppedClock(t *testing.T) {
	for _, tc := range []struct{ current, want string }{
		{"", "2026-12-03T12:00:00Z"},
		{"1733227200", "2026-12-03T12:00:00Z"},
		{"2026-12-03T12:00:00Z", "2026-12-03T12:00:00Z-1"},
		{"2026-12-03T12:00:00Z-1", "2026-12-03T12:00:00Z-2"},
		{"2026-12-03T12:00:00Z-x", "2026-12-03T12:00:00Z"},
	} {
		if got := freshValue(now, tc.current); got != tc.want {
			t.Errorf("freshValue(%q) = %q, want %q", tc.current, got, tc.want)
		}
	}
}

func TestRerunTakesOnlyItsTargets(t *testing.T) {
	seed(t)
	before := getWR(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rerun", "prefligth"}, `unknown rerun target "prefligth": did you mean preflight? The targets are preflight, podcheck`},
		{[]string{"rerun", "pod-check"}, `unknown rerun target "pod-check": did you mean podcheck?`},
		{[]string{"rerun", "migration"}, `unknown rerun target "migration": the targets are preflight, podcheck`},
		{[]string{"rerun"}, "accepts 1 arg(s), received 0"},
		{[]string{"rerun", "preflight", "podcheck"}, "accepts 1 arg(s), received 2"},
		{[]string{"retry", "now"}, `unknown command "now" for "kubectl winready retry"`},
	} {
		code, stdout, stderr := runCode(t, tc.args...)
		if code != ExitError || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit status %d, want %d and %q; stdout:\n%s\nstderr:\n%s", tc.args, code, ExitError, tc.want, stdout, stderr)
		}
	}
	if after := getWR(t); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("a refused rerun changed the object: annotations %v", after.Annotations)
	}
}

// A WindowsReadiness that Argo CD or Flux applied: retry and rerun change
// nothing without --force and print the object to commit, with the new
// value, or the merge patch alone; with --force they patch.
func TestRetryAndRerunOfAGitOpsManagedObject(t *testing.T) {
	var outs strings.Builder
	for _, tc := range []struct {
		name, manager string
		args          []string
		annotation    string
		mutate        func(*v1alpha1.WindowsReadiness)
	}{
		{"Argo CD", "argocd-controller", []string{"retry"}, v1alpha1.RetryAnnotation, func(wr *v1alpha1.WindowsReadiness) {
			wr.Annotations = map[string]string{"argocd.argoproj.io/sync-wave": "0"}
		}},
		{"Flux, the annotation in Git", "kustomize-controller", []string{"rerun", "preflight"}, v1alpha1.RerunPreflightAnnotation,
			func(wr *v1alpha1.WindowsReadiness) {
				wr.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "winready"}
				wr.Annotations = map[string]string{v1alpha1.RerunPreflightAnnotation: "from-git"}
			}},
		{"Flux by its label only", "", []string{"rerun", "podcheck"}, v1alpha1.RerunPodCheckAnnotation, func(wr *v1alpha1.WindowsReadiness) {
			wr.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "winready"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seedAs(t, tc.manager, tc.mutate)
			before := getWR(t)
			cmd := "$ kubectl winready " + strings.Join(tc.args, " ")
			code, stdout, stderr := runCode(t, tc.args...)
			outs.WriteString("### " + tc.name + "\n" + cmd + "\n--- stdout\n" + stdout + "--- stderr\n" + stderr)
			if code != ExitManagedByGitOps {
				t.Errorf("exit status %d, want %d", code, ExitManagedByGitOps)
			}
			if !strings.Contains(stdout, "    "+tc.annotation+": \"2026-12-03T12:00:00Z\"\n") {
				t.Errorf("the object to commit lacks the new value of %s:\n%s", tc.annotation, stdout)
			}
			code, stdout, stderr = runCode(t, append(tc.args, "-o", "patch")...)
			outs.WriteString(cmd + " -o patch\n--- stdout\n" + stdout + "--- stderr\n" + stderr)
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{tc.annotation: "2026-12-03T12:00:00Z"}}})
			if err != nil {
				t.Fatal(err)
			}
			if code != ExitManagedByGitOps || stdout != string(patch)+"\n" {
				t.Errorf("-o patch: exit status %d, printed %q, want %s", code, stdout, patch)
			}
			if after := getWR(t); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the object changed without --force: annotations %v", after.Annotations)
			}
			code, stdout, stderr = runCode(t, append(tc.args, "--force")...)
			outs.WriteString(cmd + " --force\n--- stdout\n" + stdout + "--- stderr\n" + stderr)
			if got := getWR(t).Annotations[tc.annotation]; code != 0 || got != "2026-12-03T12:00:00Z" {
				t.Errorf("--force: exit status %d, annotation %s=%q; stderr:\n%s", code, tc.annotation, got, stderr)
			}
		})
	}
	golden(t, "rerun-gitops", outs.String())
}
