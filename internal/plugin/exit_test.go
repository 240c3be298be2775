package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/version"
)

// helperArgs, set in the environment, makes the test binary run
// kubectl winready with these arguments (a JSON list) as the binary does,
// signals and all, and exit with its status.
const helperArgs = "WINREADY_PLUGIN_HELPER_ARGS"

func runHelper(argsJSON string) int {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 99
	}
	ctx, stop := SignalContext(context.Background())
	defer stop()
	return Run(ctx, "kubectl winready", args, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
}

// kubeconfigFor writes a kubeconfig that reaches the suite's API server as c.
func kubeconfigFor(t *testing.T, c *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData,
		InsecureSkipTLSVerify: c.Insecure}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "user"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runFlags runs kubectl winready with its kubectl flags read as the binary
// reads them (no rest.Config handed in).
func runFlags(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	o := &options{flags: genericclioptions.NewConfigFlags(true), now: func() time.Time { return now },
		streams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}}
	code = execute(context.Background(), o, "kubectl winready", args)
	return code, out.String(), errOut.String()
}

// commands are every command that talks to the cluster, as a script runs it.
var commands = [][]string{{"status"}, {"status", "--watch"}, {"status", "--until", "Ready"}, {"approve", "BGP"},
	{"pause"}, {"resume"}, {"rollback", "--yes"}, {"retry"}, {"rerun", "preflight"}, {"plan"}, {"plan", "-o", "json"},
	{"check", "--pre"}, {"check"}, {"version"}}

// TestExitStatusesOfEveryCommand runs each command where a pipeline would
// meet each exit status that does not depend on the migration: a usage
// mistake, a kubeconfig that cannot be read, a context it lacks, a cluster
// that does not answer.
func TestExitStatusesOfEveryCommand(t *testing.T) {
	good := kubeconfigFor(t, cfg)
	unreachable := kubeconfigFor(t, &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	var got strings.Builder
	row := func(wantCode int, args ...string) {
		t.Helper()
		code, stdout, stderr := runFlags(args...)
		shown := strings.ReplaceAll(strings.ReplaceAll(strings.Join(args, " "), good, "GOOD"), unreachable, "UNREACHABLE")
		stderr = strings.ReplaceAll(strings.ReplaceAll(stderr, good, "GOOD"), unreachable, "UNREACHABLE")
		// version prints this build's, which moves with the Go toolchain.
		stdout = strings.ReplaceAll(stdout, version.Get().String(), "<client>")
		fmt.Fprintf(&got, "$ kubectl winready %s\nexit %d\n%s%s", shown, code, stdout, stderr)
		if code != wantCode {
			t.Errorf("%s: exit status %d, want %d; stderr:\n%s", shown, code, wantCode, stderr)
		}
	}
	for _, cmd := range commands {
		row(ExitError, append(slicesClone(cmd), "--kubeconfig", "/nonexistent/kubeconfig")...)
		row(ExitError, append(slicesClone(cmd), "--kubeconfig", good, "--context", "nope")...)
		row(ExitError, append(slicesClone(cmd), "--kubeconfig", good, "--no-such-flag")...)
		unreachableCode := ExitUnreachable
		if cmd[0] == "plan" {
			unreachableCode = ExitError // plan's CI contract: 0, 1, 2
		}
		row(unreachableCode, append(slicesClone(cmd), "--kubeconfig", unreachable)...)
	}
	row(ExitError, "plan", "--kubeconfig", good, "--spec", "/nonexistent/windowsreadiness.yaml")
	row(ExitError, "approve", "--kubeconfig", good)
	row(ExitError, "version", "extra")
	row(ExitError, "rerun", "--kubeconfig", good, "probe")
	golden(t, "exit-statuses", got.String())
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestTimeoutEndsAWatchWithItsOwnStatus: --timeout is not success, nor a
// stall, nor an interruption.
func TestTimeoutEndsAWatchWithItsOwnStatus(t *testing.T) {
	seed(t)
	var got strings.Builder
	for _, args := range [][]string{{"status", "--until", "Ready", "--timeout", "1s"}, {"status", "--watch", "--timeout", "1s"}} {
		code, _, stderr := runCode(t, args...)
		fmt.Fprintf(&got, "$ kubectl winready %s\nexit %d\n%s", strings.Join(args, " "), code, stderr)
		if code != ExitTimeout {
			t.Errorf("%v: exit status %d, want %d; stderr:\n%s", args, code, ExitTimeout, stderr)
		}
	}
	golden(t, "timeout", got.String())
}

// TestAnInterruptedWatchIsNotSuccess sends SIGINT and SIGTERM to a running
// status --until Ready, the test binary standing in for kubectl-winready.
func TestAnInterruptedWatchIsNotSuccess(t *testing.T) {
	seed(t)
	kubeconfig := kubeconfigFor(t, cfg)
	var got strings.Builder
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		args, err := json.Marshal([]string{"status", "--until", "Ready", "--kubeconfig", kubeconfig})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(os.Environ(), helperArgs+"="+string(args))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The first tree printed: the watch runs, the signal handler is set.
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "WindowsReadiness/default") {
				break
			}
		}
		if err := cmd.Process.Signal(tc.sig); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, stdout)
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tc.code {
			t.Errorf("%s: %v, want exit status %d; stderr:\n%s", tc.sig, err, tc.code, stderr.String())
		}
		fmt.Fprintf(&got, "$ kubectl winready status --until Ready  # then %s\nexit %d\n%s", signalName(tc.sig),
			cmd.ProcessState.ExitCode(), stderr.String())
	}
	golden(t, "interrupted", got.String())
}

// TestForbiddenNamesTheVerbTheResourceAndTheRole runs the commands as a
// user bound to winready-viewer (config/rbac/user_roles.yaml as shipped)
// and as one bound to nothing, against the suite's API server.
func TestForbiddenNamesTheVerbTheResourceAndTheRole(t *testing.T) {
	seed(t)
	ctx := context.Background()
	bindRoles(t, ctx, map[string]string{"viewer": "winready-viewer"})
	viewer := userConfig(t, "viewer")
	nobody := userConfig(t, "nobody")
	// The authorizer sees the binding once its informer has it.
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, _, _ := runCodeWith(t, viewer, "status")
		return code == 0, nil
	})
	if err != nil {
		t.Fatalf("viewer cannot read the WindowsReadiness: %v", err)
	}
	var got strings.Builder
	for _, tc := range []struct {
		user string
		c    *rest.Config
		args []string
		code int
	}{
		{"viewer", viewer, []string{"status", "-o", "yaml"}, 0},
		{"viewer", viewer, []string{"pause"}, ExitForbidden},
		{"viewer", viewer, []string{"approve", "BGP"}, ExitForbidden},
		{"viewer", viewer, []string{"rollback", "--yes"}, ExitForbidden},
		{"viewer", viewer, []string{"retry"}, ExitForbidden},
		{"viewer", viewer, []string{"rerun", "podcheck"}, ExitForbidden},
		{"nobody", nobody, []string{"status"}, ExitForbidden},
		{"nobody", nobody, []string{"status", "--until", "Ready"}, ExitForbidden},
		{"nobody", nobody, []string{"pause"}, ExitForbidden},
		{"nobody", nobody, []string{"plan"}, ExitError},
	} {
		code, stdout, stderr := runCodeWith(t, tc.c, tc.args...)
		if code != tc.code {
			t.Errorf("%s: %v: exit status %d, want %d; stderr:\n%s", tc.user, tc.args, code, tc.code, stderr)
		}
		if code == 0 {
			stdout = "(the object)\n"
		}
		fmt.Fprintf(&got, "$ kubectl winready %s  # as %s\nexit %d\n%s%s", strings.Join(tc.args, " "), tc.user, code,
			stdout, stderr)
	}
	golden(t, "forbidden", got.String())
}

// bindRoles creates winready's user roles as config/rbac ships them and
// binds each user to its role, cluster-wide.
func bindRoles(t *testing.T, ctx context.Context, users map[string]string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "config", "rbac", "user_roles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []client.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		role := &rbacv1.ClusterRole{}
		if err := dec.Decode(role); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, role)
	}
	for user, role := range users {
		objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
	}
	for _, obj := range objs {
		if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
}

func userConfig(t *testing.T, name string) *rest.Config {
	t.Helper()
	u, err := testEnv.AddUser(envtest.User{Name: name}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return u.Config()
}

// TestEveryExitStatusIsInTheDocs: docs/operating.md's table is the contract
// scripts read; a status added here and not there is one nobody can rely on.
func TestEveryExitStatusIsInTheDocs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{ExitFailed, ExitError, ExitUnreachable, ExitNotInstalled, ExitNoWindowsReadiness,
		ExitManagedByGitOps, ExitRefused, ExitForbidden, ExitCheckFailed, ExitTimeout} {
		if !strings.Contains(string(data), fmt.Sprintf("\n| %d | ", code)) {
			t.Errorf("docs/operating.md has no row for exit status %d", code)
		}
	}
}

func TestPlanSaysHowTheRolloutBegins(t *testing.T) {
	var out bytes.Buffer
	printCanary(&out, nil)
	if out.Len() != 0 {
		t.Fatalf("no canary, yet %q", out.String())
	}
	printCanary(&out, &v1alpha1.CanaryStatus{Steps: []v1alpha1.StepName{v1alpha1.StepBGP}, State: v1alpha1.CanaryPlanned, Size: 3})
	if want := "once 3 nodes run the new calico-node, the pod network check runs between them and the others"; !strings.Contains(out.String(), want) ||
		!strings.Contains(out.String(), "(step BGP)") {
		t.Errorf("%q lacks %q and the step", out.String(), want)
	}
}
