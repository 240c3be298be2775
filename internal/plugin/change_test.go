package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/test/kit"
)

// The marker on spec.approvedSteps is the list's source. The generated CRD
// does not carry it (the items take StepName's own enum of six): the plugin
// refuses the other three itself.
func TestApprovableStepsAreTheMarkersOnApprovedSteps(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "api", "v1alpha1", "spec_types.go"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	const marker = "// +kubebuilder:validation:items:Enum="
	field := strings.Index(src, "ApprovedSteps []StepName")
	start := strings.LastIndex(src[:max(field, 0)], marker)
	if field < 0 || start < 0 {
		t.Fatal("no items:Enum marker above ApprovedSteps")
	}
	line, _, _ := strings.Cut(src[start+len(marker):], "\n")
	var enum []v1alpha1.StepName
	for _, s := range strings.Split(line, ";") {
		enum = append(enum, v1alpha1.StepName(s))
	}
	if !slices.Equal(enum, v1alpha1.ApprovableSteps) {
		t.Errorf("approvedSteps' marker admits %v, v1alpha1.ApprovableSteps is %v", enum, v1alpha1.ApprovableSteps)
	}
}

func TestApproveTakesOnlyApprovableStepsInAnyCase(t *testing.T) {
	seed(t)
	for _, tc := range []struct {
		arg, want string
		code      int
	}{
		{"StrictAffinity", "step StrictAffinity never waits for approval: only Encapsulation, BGP, ServicesEndpoint do", ExitError},
		{"windowsdataplane", "step WindowsDataplane never waits for approval", ExitError},
		{"BGB", `unknown step "BGB": did you mean BGP? The approvable steps are Encapsulation, BGP, ServicesEndpoint`, ExitError},
		{"nonsense", `unknown step "nonsense": the approvable steps are Encapsulation, BGP, ServicesEndpoint`, ExitError},
		{"Foo", `unknown step "Foo": the approvable steps are Encapsulation, BGP, ServicesEndpoint`, ExitError},
		{"bgp", "", 0},
		{"BGP", "", 0},
	} {
		code, stdout, stderr := runCode(t, "approve", tc.arg)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("approve %s: exit status %d, want %d and %q; stdout:\n%s\nstderr:\n%s", tc.arg, code, tc.code, tc.want, stdout, stderr)
		}
	}
	if got := getWR(t).Spec.ApprovedSteps; !slices.Equal(got, []v1alpha1.StepName{v1alpha1.StepBGP}) {
		t.Errorf("spec.approvedSteps %v, want [BGP]", got)
	}
	if _, stdout, _ := runCode(t, "approve", "bgp"); stdout != "windowsreadiness/default unchanged: BGP is approved already\n" {
		t.Errorf("approving BGP again printed %q", stdout)
	}
}

func TestPauseAndResumeSayUnchanged(t *testing.T) {
	seed(t)
	for _, tc := range []struct{ cmd, want string }{
		{"resume", "windowsreadiness/default unchanged: not paused\n"},
		{"pause", "windowsreadiness/default patched: spec.paused true\n"},
		{"pause", "windowsreadiness/default unchanged: paused already\n"},
	} {
		if code, stdout, stderr := runCode(t, tc.cmd); code != 0 || !strings.HasPrefix(stdout, tc.want) {
			t.Errorf("%s: exit status %d, stdout %q, want %q; stderr:\n%s", tc.cmd, code, stdout, tc.want, stderr)
		}
	}
}

func TestRollbackShowsTheReversePlanAndWantsYes(t *testing.T) {
	seed(t)
	code, stdout, stderr := runCode(t, "rollback")
	golden(t, "rollback-unconfirmed", "--- stdout\n"+stdout+"--- stderr\n"+stderr)
	if code != ExitRefused {
		t.Errorf("exit status %d, want %d", code, ExitRefused)
	}
	if wr := getWR(t); wr.Spec.Direction != v1alpha1.DirectionMigrate {
		t.Errorf("spec.direction %s without --yes", wr.Spec.Direction)
	}
}

func TestRollbackRefusedWhileNotAllowed(t *testing.T) {
	seed(t)
	wr := getWR(t)
	wr.Status.Conditions = append(wr.Status.Conditions, metav1.Condition{Type: conditions.RollbackAllowed,
		Status: metav1.ConditionFalse, Reason: conditions.ReasonWindowsNodesPresent, Message: "Windows nodes win-0 exist",
		LastTransitionTime: *at(-1)})
	if err := k8s.Status().Update(context.Background(), wr); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCode(t, "rollback", "--yes", "--force")
	want := "kubectl winready: rollback refused: RollbackAllowed (" + conditions.ReasonWindowsNodesPresent + "): Windows nodes win-0 exist\n"
	if code != ExitRefused || stderr != want || stdout != "" {
		t.Errorf("exit status %d, want %d; stdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", code, ExitRefused, stdout, stderr, want)
	}
	if wr := getWR(t); wr.Spec.Direction != v1alpha1.DirectionMigrate {
		t.Errorf("spec.direction %s", wr.Spec.Direction)
	}
}

func TestErrorsSayWhatToDo(t *testing.T) {
	// No WindowsReadiness: the suite's cluster before seed.
	for _, args := range [][]string{{"status"}, {"pause"}, {"approve", "BGP"}, {"rollback", "--yes"}, {"retry"}, {"rerun", "preflight"}} {
		code, _, stderr := runCode(t, args...)
		if code != ExitNoWindowsReadiness || !strings.Contains(stderr, "there is no WindowsReadiness default yet") ||
			!strings.Contains(stderr, "  kind: WindowsReadiness\n") {
			t.Errorf("%v: exit status %d, want %d; stderr:\n%s", args, code, ExitNoWindowsReadiness, stderr)
		}
	}

	// Unreachable: a server that is not there.
	unreachable := &rest.Config{Host: "https://127.0.0.1:1"}
	code, _, stderr := runCodeWith(t, unreachable, "status")
	if code != ExitUnreachable || !strings.Contains(stderr, "cannot reach the cluster") || !strings.Contains(stderr, "--context") {
		t.Errorf("unreachable: exit status %d, want %d; stderr:\n%s", code, ExitUnreachable, stderr)
	}

	// Not installed: an API server without winready's CRD.
	bare, err := kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs, NoWinreadyCRD: true})
	if err != nil {
		t.Fatal(err)
	}
	bareCfg, err := bare.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bare.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, args := range [][]string{{"status"}, {"pause"}} {
		code, _, stderr := runCodeWith(t, bareCfg, args...)
		if code != ExitNotInstalled || !strings.Contains(stderr, "winready is not installed in this cluster") ||
			!strings.Contains(stderr, "kubectl apply -f https://github.com/winready/winready/releases/") {
			t.Errorf("%v without the CRD: exit status %d, want %d; stderr:\n%s", args, code, ExitNotInstalled, stderr)
		}
	}
}

func TestGitOpsOwnerOf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		managers    []string
		labels      map[string]string
		annotations map[string]string
		want        string
	}{
		{"kubectl alone", []string{"kubectl-client-side-apply"}, nil, nil, ""},
		{"Argo CD's controller", []string{"kubectl-client-side-apply", "argocd-controller"}, nil, nil, "Argo CD (field manager argocd-controller)"},
		{"Argo CD's older controller", []string{"argocd-application-controller"}, nil, nil, "Argo CD (field manager argocd-application-controller)"},
		{"Flux's kustomize-controller", []string{"kustomize-controller"}, nil, nil, "Flux (field manager kustomize-controller)"},
		{"Flux's helm-controller", []string{"helm-controller"}, nil, nil, "Flux (field manager helm-controller)"},
		{"Argo CD's tracking annotation", nil, nil, map[string]string{"argocd.argoproj.io/tracking-id": "winready:winready.io/WindowsReadiness:/default"}, "Argo CD (annotation argocd.argoproj.io/tracking-id)"},
		{"Flux Kustomization's label", nil, map[string]string{"kustomize.toolkit.fluxcd.io/name": "winready"}, nil, "Flux (label kustomize.toolkit.fluxcd.io/name)"},
		{"Flux HelmRelease's label", nil, map[string]string{"helm.toolkit.fluxcd.io/name": "winready"}, nil, "Flux (label helm.toolkit.fluxcd.io/name)"},
		{"instance label alone (Helm sets it too)", nil, map[string]string{"app.kubernetes.io/instance": "winready"}, nil, ""},
		{"instance label with an Argo CD sync wave", nil, map[string]string{"app.kubernetes.io/instance": "winready"},
			map[string]string{"argocd.argoproj.io/sync-wave": "0"}, "Argo CD (label app.kubernetes.io/instance)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}
			for _, m := range tc.managers {
				obj.ManagedFields = append(obj.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationApply})
			}
			if got := gitOpsOwner(obj); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// A WindowsReadiness that Argo CD or Flux applied: pause changes nothing
// without --force and prints the spec to commit; with --force it patches as
// field manager kubectl-winready.
func TestPauseOfAGitOpsManagedObject(t *testing.T) {
	var outs string
	for _, tc := range []struct {
		name, manager string
		mutate        func(*v1alpha1.WindowsReadiness)
	}{
		{"Argo CD", "argocd-controller", func(wr *v1alpha1.WindowsReadiness) {
			wr.Annotations = map[string]string{"argocd.argoproj.io/sync-wave": "0"}
		}},
		{"Flux", "kustomize-controller", func(wr *v1alpha1.WindowsReadiness) {
			wr.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "winready", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
		}},
		{"Flux by its label only", "", func(wr *v1alpha1.WindowsReadiness) {
			wr.Labels = map[string]string{"kustomize.toolkit.fluxcd.io/name": "winready"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seedAs(t, tc.manager, func(wr *v1alpha1.WindowsReadiness) {
				tc.mutate(wr)
				wr.Spec.RequireApproval = true
				wr.Spec.ApprovedSteps = []v1alpha1.StepName{v1alpha1.StepEncapsulation}
			})
			before := getWR(t)
			code, stdout, stderr := runCode(t, "pause")
			outs += "### " + tc.name + "\n$ kubectl winready pause\n--- stdout\n" + stdout + "--- stderr\n" + stderr
			if code != ExitManagedByGitOps {
				t.Errorf("exit status %d, want %d", code, ExitManagedByGitOps)
			}
			if after := getWR(t); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the object changed without --force: spec %+v", after.Spec)
			}
			code, stdout, stderr = runCode(t, "pause", "--force")
			outs += "$ kubectl winready pause --force\n--- stdout\n" + stdout + "--- stderr\n" + stderr
			after := getWR(t)
			if code != 0 || !after.Spec.Paused {
				t.Errorf("--force: exit status %d, spec.paused %t", code, after.Spec.Paused)
			}
			if !slices.ContainsFunc(after.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
				return m.Manager == FieldManager && strings.Contains(m.FieldsV1.GetRawString(), `"f:paused"`)
			}) {
				t.Errorf("spec.paused is not managed by %s: %v", FieldManager, after.ManagedFields)
			}
		})
	}
	golden(t, "pause-gitops", outs)
}

// TestTheObjectToCommitIsTheOneInGit applies a WindowsReadiness from Git as
// Argo CD (client-side apply, its default, and server-side apply) and Flux
// (server-side apply) do, lets the API server default it and the manager
// write a status, and asks for a change: the object printed differs from
// the one in Git only in the field changed, and -o patch prints that change
// alone.
func TestTheObjectToCommitIsTheOneInGit(t *testing.T) {
	const spec = `spec:
  direction: Migrate
  requireApproval: true
  approvedSteps: [Encapsulation]
`
	argo := `apiVersion: winready.io/v1alpha1
kind: WindowsReadiness
metadata:
  name: default
  annotations:
    argocd.argoproj.io/sync-wave: "0"
    argocd.argoproj.io/tracking-id: winready:winready.io/WindowsReadiness:/default
  labels:
    app.kubernetes.io/instance: winready
    team: platform
` + spec
	flux := `apiVersion: winready.io/v1alpha1
kind: WindowsReadiness
metadata:
  name: default
  labels:
    kustomize.toolkit.fluxcd.io/name: winready
    kustomize.toolkit.fluxcd.io/namespace: flux-system
` + spec
	var outs strings.Builder
	for _, tc := range []struct {
		name, manager, inGit string
		serverSide           bool
	}{
		{"Argo CD, client-side apply", "argocd-controller", argo, false},
		{"Argo CD, server-side apply", "argocd-controller", argo, true},
		{"Flux", "kustomize-controller", flux, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			gitObj := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.inGit), &gitObj); err != nil {
				t.Fatal(err)
			}
			applyAs(t, ctx, tc.manager, gitObj, tc.serverSide)
			for _, tr := range []struct {
				args  []string
				field string
				value any
			}{
				{[]string{"pause"}, "paused", true},
				{[]string{"approve", "BGP"}, "approvedSteps", []any{"Encapsulation", "BGP"}},
			} {
				code, stdout, stderr := runCode(t, tr.args...)
				outs.WriteString("### " + tc.name + "\n$ kubectl winready " + strings.Join(tr.args, " ") +
					"\n--- stdout\n" + stdout + "--- stderr\n" + stderr)
				if code != ExitManagedByGitOps {
					t.Errorf("%v: exit status %d, want %d; stderr:\n%s", tr.args, code, ExitManagedByGitOps, stderr)
				}
				got := map[string]any{}
				if err := yaml.Unmarshal([]byte(stdout), &got); err != nil {
					t.Fatal(err)
				}
				want := runtime.DeepCopyJSON(gitObj)
				want["spec"].(map[string]any)[tr.field] = tr.value
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%v printed, beside the change, more or less than Git holds:\n%s\nwant:\n%v", tr.args, stdout, want)
				}

				code, stdout, stderr = runCode(t, append(tr.args, "-o", "patch")...)
				outs.WriteString("$ kubectl winready " + strings.Join(tr.args, " ") + " -o patch\n--- stdout\n" + stdout +
					"--- stderr\n" + stderr)
				patch, err := json.Marshal(map[string]any{"spec": map[string]any{tr.field: tr.value}})
				if err != nil {
					t.Fatal(err)
				}
				if code != ExitManagedByGitOps || stdout != string(patch)+"\n" {
					t.Errorf("%v -o patch: exit status %d, printed %q, want %s", tr.args, code, stdout, patch)
				}
			}
		})
	}
	golden(t, "commit-gitops", outs.String())
}

// applyAs creates obj as manager does: server-side apply, or client-side
// apply with its last-applied-configuration annotation; then the manager
// writes a status, which Git never holds.
func applyAs(t *testing.T, ctx context.Context, manager string, obj map[string]any, serverSide bool) {
	t.Helper()
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
	if serverSide {
		if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	} else {
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		a := u.GetAnnotations()
		a[lastApplied] = string(data)
		u.SetAnnotations(a)
		if err := k8s.Create(ctx, u, client.FieldOwner(manager)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), u); err != nil {
			t.Error(err)
		}
	})
	wr := getWR(t)
	wr.Status = v1alpha1.WindowsReadinessStatus{ObservedGeneration: wr.Generation, Phase: v1alpha1.PhaseMigrating,
		Message: "step 1/6 (StrictAffinity)"}
	if err := k8s.Status().Update(ctx, wr); err != nil {
		t.Fatal(err)
	}
}
