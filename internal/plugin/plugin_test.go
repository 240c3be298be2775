package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/onsi/gomega"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
	"github.com/winready/winready/test/kit/look"
)

var update = flag.Bool("update", false, "rewrite the golden files from the output")

var (
	k8s     client.Client
	cfg     *rest.Config
	testEnv *kit.Env
)

func TestMain(m *testing.M) {
	// The test binary is also kubectl-winready for the tests that send it
	// a signal (helperArgs).
	if args := os.Getenv(helperArgs); args != "" {
		os.Exit(runHelper(args))
	}
	flag.Parse()
	// Calico's CRDs too (make envtest-assets puts them in bin/crds): plan
	// reads the Installation.
	env, err := kit.Environment(kit.Options{CalicoCRDs: filepath.Join("..", "..", "bin", "crds")})
	if err != nil {
		panic(err)
	}
	testEnv = env
	cfg, err = env.Start()
	if err != nil {
		panic(err)
	}
	scheme, err := schemeOf()
	if err != nil {
		panic(err)
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		panic(err)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		panic(err)
	}
	os.Exit(code)
}

// now is the clock every golden file was written with.
var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func at(minutes int) *metav1.Time {
	t := metav1.NewTime(now.Add(time.Duration(minutes) * time.Minute))
	return &t
}

// seed creates the WindowsReadiness in the middle of a migration: BGP's
// calico-node rollout under way.
func seed(t *testing.T) { seedAs(t, "", nil) }

// seedAs seeds as field manager manager ("" for the client's default), with
// mutate applied to the object before it is created.
func seedAs(t *testing.T, manager string, mutate func(*v1alpha1.WindowsReadiness)) {
	t.Helper()
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name},
		Spec: v1alpha1.WindowsReadinessSpec{Direction: v1alpha1.DirectionMigrate}}
	if mutate != nil {
		mutate(wr)
	}
	var opts []client.CreateOption
	if manager != "" {
		opts = append(opts, client.FieldOwner(manager))
	}
	if err := k8s.Create(context.Background(), wr, opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), wr); err != nil {
			t.Error(err)
		}
	})
	wr.Status = v1alpha1.WindowsReadinessStatus{
		ObservedGeneration: 1, Phase: v1alpha1.PhaseMigrating, CurrentStep: v1alpha1.StepBGP,
		Message: "step 3/6 (BGP): waiting for DaemonSet calico-system/calico-node rollout (2 of 5 updated)",
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "WaitingForCalico", Message: "migrating", LastTransitionTime: *at(-10)},
			{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "WaitingForCalico", Message: "step 3/6 (BGP): waiting for the rollout", LastTransitionTime: *at(-10)},
			{Type: "Stalled", Status: metav1.ConditionFalse, Reason: "WaitingForCalico", LastTransitionTime: *at(-10)},
		},
		Steps: []v1alpha1.StepStatus{
			{Name: v1alpha1.StepStrictAffinity, State: v1alpha1.StepCompleted, Changed: true, StartedAt: at(-12), FinishedAt: at(-11)},
			{Name: v1alpha1.StepEncapsulation, State: v1alpha1.StepCompleted, Changed: true, StartedAt: at(-11), FinishedAt: at(-10)},
			{Name: v1alpha1.StepBGP, State: v1alpha1.StepInProgress, Changed: true, StartedAt: at(-10), Message: "waiting for the rollout"},
			{Name: v1alpha1.StepServicesEndpoint, State: v1alpha1.StepPending},
		},
		Rollout: &v1alpha1.RolloutStatus{DaemonSet: "calico-system/calico-node", Updated: 2, Total: 5, Progress: "2/5",
			PacePerNode: &metav1.Duration{Duration: 27 * time.Second}, EstimatedTimeLeft: &metav1.Duration{Duration: 81 * time.Second}},
		Canary: &v1alpha1.CanaryStatus{Steps: []v1alpha1.StepName{v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint},
			Direction: v1alpha1.DirectionMigrate, State: v1alpha1.CanaryChecking, Size: 2, Nodes: []string{"linux-0", "linux-1"},
			Round: &v1alpha1.PodCheckRound{Trigger: "Canary"}},
		Preflight: &v1alpha1.PreflightStatus{CompletedAt: at(-13), Checks: []v1alpha1.PreflightCheck{
			{Name: "IPIPPools", Result: v1alpha1.CheckPass, Message: "no IPIP pool"},
			{Name: "KubeDNS", Result: v1alpha1.CheckPass, Message: "Service kube-system/kube-dns exists"}}},
	}
	if err := k8s.Status().Update(context.Background(), wr); err != nil {
		t.Fatal(err)
	}
	for i, reason := range []string{"OriginalsRecorded", "StepStarted", "StepFinished", "StepStarted", "StepFinished", "StepStarted"} {
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("default.%d", i)},
			EventTime: metav1.NewMicroTime(now.Add(time.Duration(i-12) * time.Minute)), ReportingController: "winready",
			ReportingInstance: "winready-0", Action: "Migrate", Reason: reason, Type: "Normal", Note: fmt.Sprintf("event %d", i),
			Regarding: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WindowsReadiness", Name: v1alpha1.Name}}
		if err := k8s.Create(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), ev) })
	}
}

// run runs kubectl winready with args against the suite's API server.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := &options{flags: genericclioptions.NewConfigFlags(true), now: func() time.Time { return now },
		streams:    genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		restConfig: func() (*rest.Config, error) { return cfg, nil }}
	cmd := newCommand(o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// runCode runs kubectl winready as the binary does: the exit status, stdout
// and stderr.
func runCode(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCodeWith(t, cfg, args...)
}

func runCodeWith(t *testing.T, c *rest.Config, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := &options{flags: genericclioptions.NewConfigFlags(true), now: func() time.Time { return now },
		streams:    genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		restConfig: func() (*rest.Config, error) { return c, nil }}
	code = execute(context.Background(), o, "kubectl winready", args)
	return code, out.String(), errOut.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -run %s -update rewrites it):\n--- got\n%s--- want\n%s", path, t.Name(), got, want)
	}
}

// getWR reads the WindowsReadiness with test/kit/look, failing t.
func getWR(t *testing.T) *v1alpha1.WindowsReadiness {
	t.Helper()
	return look.With(context.Background(), gomega.NewWithT(t), k8s).WR()
}

func TestStatusShowsTheTree(t *testing.T) {
	seed(t)
	out, err := run(t, "status")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status", out)
}

// TestStatusFoldsWhatPassed: the checks that pass are one line, the
// failing, warning and informing ones are shown in full, as are the steps
// not completed; --show-all shows everything.
func TestStatusFoldsWhatPassed(t *testing.T) {
	seed(t)
	wr := getWR(t)
	wr.Status.Preflight.Checks = []v1alpha1.PreflightCheck{
		{Name: "IPIPPools", Result: v1alpha1.CheckPass, Message: "no IPIP pool"},
		{Name: "KubeDNS", Result: v1alpha1.CheckFail, Message: "no Service kube-system/kube-dns"},
		{Name: "CalicoVersion", Result: v1alpha1.CheckPass, Message: "Calico v3.30.2 (Calico)"},
		{Name: "BlockSize", Result: v1alpha1.CheckInfo, Message: "block size 26"},
		{Name: "Borrowed", Result: v1alpha1.CheckPass, Message: "no borrowed address"},
		{Name: "MTU", Result: v1alpha1.CheckWarn, Message: "MTU 1450 leaves no room for VXLAN"},
	}
	if err := k8s.Status().Update(context.Background(), wr); err != nil {
		t.Fatal(err)
	}
	folded, err := run(t, "status")
	if err != nil {
		t.Fatal(err)
	}
	all, err := run(t, "status", "--show-all")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status-folded", "$ kubectl winready status\n"+folded+"$ kubectl winready status --show-all\n"+all)
	for _, shown := range []string{"KubeDNS                Fail", "MTU                    Warn", "BlockSize              Info",
		"3 checks passed        Pass", "2 steps completed      Completed", "BGP                    InProgress"} {
		if !strings.Contains(folded, shown) {
			t.Errorf("status does not show %q:\n%s", shown, folded)
		}
	}
	for _, row := range []string{"IPIPPools              Pass", "CalicoVersion          Pass", "Borrowed               Pass",
		"StrictAffinity         Completed", "Encapsulation          Completed"} {
		if strings.Contains(folded, row) {
			t.Errorf("status shows the row %q:\n%s", row, folded)
		}
		if !strings.Contains(all, row) {
			t.Errorf("--show-all does not show the row %q:\n%s", row, all)
		}
	}
	if strings.Contains(all, "checks passed") || strings.Contains(all, "steps completed") {
		t.Errorf("--show-all folds:\n%s", all)
	}
}

func TestStatusAsYAML(t *testing.T) {
	seed(t)
	out, err := run(t, "status", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains([]byte(out), []byte("currentStep: BGP")) || !bytes.Contains([]byte(out), []byte("kind: WindowsReadiness")) {
		t.Errorf("-o yaml printed:\n%s", out)
	}
	if _, err := run(t, "status", "-o", "wide"); err == nil {
		t.Error("-o wide was accepted")
	}
}

func TestApproveAddsTheStepOnce(t *testing.T) {
	seed(t)
	out, err := run(t, "approve", "BGP")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "approve", out)
	again, err := run(t, "approve", "BGP")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "approve-again", again)
	if got := getWR(t).Spec.ApprovedSteps; len(got) != 1 || got[0] != v1alpha1.StepBGP {
		t.Errorf("spec.approvedSteps %v", got)
	}
}

func TestPauseResumeAndRollbackEachPatchOneField(t *testing.T) {
	seed(t)
	var outs string
	for _, tc := range []struct {
		cmd   string
		check func(*v1alpha1.WindowsReadiness) bool
	}{
		{"pause", func(wr *v1alpha1.WindowsReadiness) bool { return wr.Spec.Paused }},
		{"resume", func(wr *v1alpha1.WindowsReadiness) bool { return !wr.Spec.Paused }},
		{"rollback --yes", func(wr *v1alpha1.WindowsReadiness) bool { return wr.Spec.Direction == v1alpha1.DirectionRollback }},
	} {
		out, err := run(t, strings.Fields(tc.cmd)...)
		if err != nil {
			t.Fatal(err)
		}
		outs += "$ kubectl winready " + tc.cmd + "\n" + out
		if wr := getWR(t); !tc.check(wr) {
			t.Errorf("after %s the spec is %+v", tc.cmd, wr.Spec)
		}
	}
	golden(t, "pause-resume-rollback", outs)
}

func TestPlanWithoutAnInstallationExits2(t *testing.T) {
	for _, args := range [][]string{{"plan"}, {"plan", "-o", "json"}, {"plan", "-o", "yaml"}} {
		code, stdout, stderr := runCode(t, args...)
		if code != ExitError || stdout != "" || !strings.Contains(stderr, "kubectl winready: no Installation default") {
			t.Errorf("%v: exit status %d, want 2, nothing on stdout and the missing Installation named; stdout:\n%s\nstderr:\n%s",
				args, code, stdout, stderr)
		}
	}
	if code, _, stderr := runCode(t, "plan", "-o", "wide"); code != ExitError || !strings.Contains(stderr, "unknown output format") {
		t.Errorf("-o wide: exit status %d; stderr:\n%s", code, stderr)
	}
}

func TestPlanOfASeededCluster(t *testing.T) {
	ctx := context.Background()
	if err := calicosim.Seed(ctx, k8s, calicosim.MainCluster()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := calicosim.Clean(ctx, k8s); err != nil {
			t.Error(err)
		}
	})
	code, out, stderr := runCode(t, "plan")
	golden(t, "plan", fmt.Sprintf("%s--- exit status %d, stderr: %q\n", out, code, stderr))
	code, js, stderr := runCode(t, "plan", "-o", "json")
	var res struct {
		Checks []v1alpha1.PreflightCheck `json:"checks"`
		Passed bool                      `json:"passed"`
	}
	if jerr := json.Unmarshal([]byte(js), &res); jerr != nil || len(res.Checks) == 0 {
		t.Fatalf("-o json printed %q (%v); stderr %s", js, jerr, stderr)
	}
	if code != 0 || !res.Passed {
		t.Errorf("passed %t, exit status %d, want 0; stderr:\n%s", res.Passed, code, stderr)
	}
}

func TestVersionPrintsTheBuild(t *testing.T) {
	out, err := run(t, "version", "--client")
	if err != nil || !strings.HasPrefix(out, "Client Version: winready dev (revision ") || strings.Count(out, "\n") != 1 {
		t.Errorf("version printed %q, %v", out, err)
	}
}
