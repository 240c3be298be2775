package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/config/admission"
	"github.com/winready/winready/internal/version"
	"github.com/winready/winready/test/calicosim"
)

// serverVersion is the suite's API server's version, which the golden files
// show as <server>: it is envtest's, bumped with the assets.
func serverVersion(t *testing.T) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.GitVersion
}

// transcript runs kubectl winready as c and writes what a terminal shows,
// with the exit status, the server's version and this build's as
// placeholders; it fails t when the status is not want.
func transcript(t *testing.T, got *strings.Builder, c *rest.Config, as string, want int, args ...string) {
	t.Helper()
	code, stdout, stderr := runCodeWith(t, c, args...)
	if code != want {
		t.Errorf("%v as %s: exit status %d, want %d; stdout:\n%s\nstderr:\n%s", args, as, code, want, stdout, stderr)
	}
	out := strings.ReplaceAll(stdout+stderr, serverVersion(t), "<server>")
	out = strings.ReplaceAll(out, version.Get().String(), "<client>")
	fmt.Fprintf(got, "$ kubectl winready %s  # as %s\nexit %d\n%s", strings.Join(args, " "), as, code, out)
}

// TestCheckBeforeInstall runs check --pre on a cluster without the Tigera
// operator's Installation, with one whose Calico the preflight accepts, with
// one it refuses, and as a user who may do nothing.
func TestCheckBeforeInstall(t *testing.T) {
	ctx := context.Background()
	var got strings.Builder
	transcript(t, &got, cfg, "admin", ExitCheckFailed, "check", "--pre")
	if err := calicosim.Seed(ctx, k8s, calicosim.MainCluster()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := calicosim.Clean(ctx, k8s); err != nil {
			t.Error(err)
		}
	})
	transcript(t, &got, cfg, "admin", 0, "check", "--pre")
	inst := &operatorv1.Installation{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "default"}, inst); err != nil {
		t.Fatal(err)
	}
	inst.Status.CalicoVersion = "v3.26.4"
	if err := k8s.Status().Update(ctx, inst); err != nil {
		t.Fatal(err)
	}
	transcript(t, &got, cfg, "admin", ExitCheckFailed, "check", "--pre")
	// A 403 goes through the one exit table, after every line is printed.
	transcript(t, &got, userConfig(t, "nobody"), "nobody", ExitForbidden, "check", "--pre")
	golden(t, "check-pre", got.String())

	code, js, stderr := runCode(t, "check", "--pre", "-o", "json")
	var r checkReport
	if err := json.Unmarshal([]byte(js), &r); err != nil || r.Stage != "pre" || r.Passed || len(r.Checks) == 0 {
		t.Errorf("-o json printed %q (%v); stderr %s", js, err, stderr)
	}
	if code != ExitCheckFailed {
		t.Errorf("-o json: exit status %d, want %d", code, ExitCheckFailed)
	}
}

// TestCheckAfterInstall runs check on the suite's cluster, which serves the
// CRD and nothing else of install.yaml, then with the manager available and
// config/admission's policies and bindings, then as a viewer.
func TestCheckAfterInstall(t *testing.T) {
	var got strings.Builder
	transcript(t, &got, cfg, "admin", ExitCheckFailed, "check")
	installManager(t, map[string]string{versionLabel: "v0.1.0"}, "registry.example.com/winready@sha256:0123")
	installAdmission(t, 1)
	transcript(t, &got, cfg, "admin", ExitCheckFailed, "check")
	installAdmission(t, 0)
	transcript(t, &got, cfg, "admin", 0, "check")
	ctx := context.Background()
	bindRoles(t, ctx, map[string]string{"check-viewer": "winready-viewer"})
	viewer := userConfig(t, "check-viewer")
	// The authorizer sees the binding once its informer has it: until then
	// status is forbidden (8); then it finds no WindowsReadiness (5).
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, _, _ := runCodeWith(t, viewer, "status")
		return code == ExitNoWindowsReadiness, nil
	}); err != nil {
		t.Fatalf("check-viewer cannot read WindowsReadinesses: %v", err)
	}
	transcript(t, &got, viewer, "check-viewer", ExitForbidden, "check")
	golden(t, "check", got.String())

	code, out, stderr := runCode(t, "check", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "stage: installed") || !strings.Contains(out, "passed: true") {
		t.Errorf("-o yaml: exit status %d, stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if code, _, stderr := runCode(t, "check", "-o", "wide"); code != ExitError || !strings.Contains(stderr, "unknown output format") {
		t.Errorf("-o wide: exit status %d; stderr:\n%s", code, stderr)
	}
}

// installManager creates the manager's Deployment, available as a
// Deployment controller would report it (envtest runs none).
func installManager(t *testing.T, labels map[string]string, image string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sel := map[string]string{"app.kubernetes.io/name": "winready", "app.kubernetes.io/component": "manager"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: managerDeployment, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: image}}}}}}
	if err := k8s.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), dep); err != nil {
			t.Error(err)
		}
	})
	dep.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
			Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."}}}
	if err := k8s.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
}

// installAdmission creates a stand-in for each policy and binding of
// config/admission but the first skip of each, with its name: check reads
// names only, and the real policies would judge this suite's writes.
func installAdmission(t *testing.T, skip int) {
	t.Helper()
	ctx := context.Background()
	want, err := admission.Names()
	if err != nil {
		t.Fatal(err)
	}
	create := func(obj client.Object) {
		if err := k8s.Create(ctx, obj); apierrors.IsAlreadyExists(err) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
	for _, name := range want.Policies[skip:] {
		create(&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE"},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"winready.io"}, APIVersions: []string{"*"}, Resources: []string{"nothing"}}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "true"}}}})
	}
	for _, name := range want.Bindings[skip:] {
		create(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}}})
	}
}

// TestVersionPrintsTheClientAndTheServers: the plugin's version, then the
// server's and the manager's, or the plugin's alone with --client, even
// where no cluster answers.
func TestVersionPrintsTheClientAndTheServers(t *testing.T) {
	unreachable := &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	var got strings.Builder
	transcript(t, &got, cfg, "admin", 0, "version")
	transcript(t, &got, unreachable, "admin, unreachable", 0, "version", "--client")
	transcript(t, &got, unreachable, "admin, unreachable", ExitUnreachable, "version")
	installManager(t, nil, "registry.example.com/winready:v0.2.0@sha256:0123")
	transcript(t, &got, cfg, "admin", 0, "version")
	golden(t, "version", got.String())

	code, js, stderr := runCode(t, "version", "-o", "json")
	var v versions
	if err := json.Unmarshal([]byte(js), &v); err != nil || code != 0 || v.Client.Version != version.Get().Version ||
		v.Kubernetes == nil || v.Kubernetes.GitVersion != serverVersion(t) || v.Manager == nil || v.Manager.Version != "v0.2.0" {
		t.Errorf("-o json: exit status %d, printed %q (%v); stderr %s", code, js, err, stderr)
	}
	// A script that asks for JSON gets a document even from a cluster that
	// does not answer, and the status that says so.
	code, js, _ = runCodeWith(t, unreachable, "version", "-o", "json")
	v = versions{}
	if err := json.Unmarshal([]byte(js), &v); err != nil || code != ExitUnreachable || v.Client.Version == "" || v.Kubernetes != nil {
		t.Errorf("-o json, unreachable: exit status %d, printed %q (%v)", code, js, err)
	}
}

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"winready:dev":                                "dev",
		"registry.example.com/winready:v0.1.0":        "v0.1.0",
		"registry:5000/winready:v0.1.0@sha256:0123":   "v0.1.0",
		"registry:5000/winready":                      "",
		"registry.example.com/winready@sha256:0123ab": "",
	} {
		if got := imageTag(image); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestKubernetesVersion(t *testing.T) {
	for v, want := range map[string]v1alpha1.CheckResult{
		"v1.30.9":            v1alpha1.CheckFail,
		"v1.34.8":            v1alpha1.CheckFail,
		"v1.35.0":            v1alpha1.CheckPass,
		"v1.33.4-eks-2f9b5e": v1alpha1.CheckFail,
		"v1.36.1-eks-2f9b5e": v1alpha1.CheckPass,
		"v2.0.0":             v1alpha1.CheckPass,
		"v1.29.3+rke2r1":     v1alpha1.CheckFail,
		"v1.35.2+rke2r1":     v1alpha1.CheckPass,
		"unknown":            v1alpha1.CheckWarn,
	} {
		if got := kubernetesVersion(v); got.Result != want || (want == v1alpha1.CheckFail) != (got.Fix != "") {
			t.Errorf("kubernetesVersion(%q) = %+v, want %s with a fix when it fails", v, got, want)
		}
	}
}
