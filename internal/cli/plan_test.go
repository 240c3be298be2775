package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"
	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/controllers"
	"github.com/winready/winready/internal/detect"
	"github.com/winready/winready/internal/plugin"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/test/calicosim"
	"github.com/winready/winready/test/kit"
	"github.com/winready/winready/test/kit/look"
)

// runPlanCmd runs "winready plan args" through dispatch, as main does, and
// returns the exit status and what it printed.
func runPlanCmd(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	cmds := refuse(t)
	cmds.plan = func(a []string) int { return plan(ctx, a, &out, &errs) }
	code = dispatch(append([]string{"plan"}, args...), io.Discard, &errs, cmds)
	return code, out.String(), errs.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlanExitStatus covers the errors that need no cluster: each ends with
// status 2, before or instead of any request.
func TestPlanExitStatus(t *testing.T) {
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	unreachable := writeFile(t, "unreachable.kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, closed))
	notWR := writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	typo := writeFile(t, "typo.yaml", "apiVersion: winready.io/v1alpha1\nkind: WindowsReadiness\nmetadata: {name: default}\nspec: {serviceCIDR: [10.96.0.0/12]}\n")
	rollback := writeFile(t, "rollback.yaml", "apiVersion: winready.io/v1alpha1\nkind: WindowsReadiness\nmetadata: {name: default}\nspec: {direction: Rollback}\n")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"closed port", []string{"--kubeconfig", unreachable}, 2, closed},
		{"closed port, JSON asked", []string{"--kubeconfig", unreachable, "-o", "json"}, 2, "cannot reach the cluster"},
		{"no kubeconfig file", []string{"--kubeconfig", "/nonexistent"}, 2, "/nonexistent"},
		{"unreadable spec", []string{"--kubeconfig", unreachable, "--spec", "/nonexistent.yaml"}, 2, "--spec"},
		{"not a WindowsReadiness", []string{"--kubeconfig", unreachable, "--spec", notWR}, 2, "not a winready.io/v1alpha1 WindowsReadiness"},
		{"unknown spec field", []string{"--kubeconfig", unreachable, "--spec", typo}, 2, "serviceCIDR"},
		{"rollback spec", []string{"--kubeconfig", unreachable, "--spec", rollback}, 2, "shows the migration only"},
		{"unknown flag", []string{"--bogus"}, 2, "unknown flag: --bogus"},
		{"stray argument", []string{"extra"}, 2, `unknown command "extra" for "winready plan"`},
		{"unknown output", []string{"-o", "wide"}, 2, `unknown output format "wide"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, stdout, stderr := runPlanCmd(t, ctx, tc.args...)
			if code != tc.code {
				t.Errorf("exit status %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			if stdout != "" {
				t.Errorf("an error printed on stdout:\n%s", stdout)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
		})
	}
	code, stdout, _ := runPlanCmd(t, context.Background(), "-h")
	for _, want := range []string{"winready plan [flags]", "--context", "--kubeconfig", "-o, --output", "Exit status: 0"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("-h: exit status %d, stdout lacks %q:\n%s", code, want, stdout)
		}
	}
}

// TestReadOnlyConfig shows that a request that would write never leaves.
func TestReadOnlyConfig(t *testing.T) {
	var (
		mu      sync.Mutex
		methods []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		methods = append(methods, r.Method)
	}))
	defer srv.Close()
	hc, err := rest.HTTPClientFor(plugin.ReadOnly(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet} {
		req, err := http.NewRequest(method, srv.URL+"/api/v1/namespaces/default/configmaps", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if (err == nil) != (method == http.MethodGet) {
			t.Errorf("%s: %v", method, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(methods, []string{http.MethodGet}) {
		t.Errorf("the server saw %q, want only GET", methods)
	}
}

// TestPlan runs winready plan under the ClusterRole winready-plan, against
// envtest with the simulated Tigera operator.
func TestPlan(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset: point it at the envtest binaries, e.g. KUBEBUILDER_ASSETS=$PWD/bin/k8s/1.37.2 (make envtest-assets)")
	}
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	root := filepath.Join("..", "..") // the repository's, from this package's directory
	env, err := kit.Environment(kit.Options{CalicoCRDs: filepath.Join(root, "bin", "crds")})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	scheme, err := controllers.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	mgr, _, _, err := calicosim.NewManager(cfg, scheme, calicosim.Options{}, "winready-system")
	if err != nil {
		t.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(ctx)
	simDone := make(chan error, 1)
	go func() { simDone <- mgr.Start(simCtx) }()
	t.Cleanup(func() {
		stopSim()
		if err := <-simDone; err != nil {
			t.Errorf("simulator: %v", err)
		}
	})

	kubeconfig := readerKubeconfig(t, ctx, env, admin)

	t.Run("main cluster: passes, prints the plan, changes nothing", func(t *testing.T) {
		if err := calicosim.Seed(ctx, admin, calicosim.MainCluster()); err != nil {
			t.Fatal(err)
		}
		if err := calicosim.WaitSettled(ctx, admin, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		before := installation(t, ctx, admin)
		// envtest's API server keeps a ServiceCIDR, which comes before kubeadm's serviceSubnet.
		cidrs, source, err := detect.ServiceCIDRs(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		serviceCIDRs := "[" + strings.Join(cidrs, ", ") + "]"

		code, stdout, stderr := runPlanCmd(t, ctx, "--kubeconfig", kubeconfig)
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		for _, want := range []string{"NAME", "RESULT", "MESSAGE", preflight.CheckCalicoAPI, preflight.CheckIPIPPools,
			"STEP", "OBJECT", "FIELD", "BEFORE", "AFTER",
			strings.Join(cidrs, ","), "serviceCIDRs from " + source,
			"10.0.0.10:6443", "API server from kubeadm-config controlPlaneEndpoint"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		for field, change := range map[string][]string{
			"spec.calicoNetwork.bgp": {"Enabled", "Disabled"},
			"spec.strictAffinity":    {"false", "true"},
			"spec.serviceCIDRs":      {"<absent>", serviceCIDRs},
		} {
			if row := rowOf(stdout, field); !slices.Equal(row[max(len(row)-2, 0):], change) {
				t.Errorf("%s: row %q, want it to end with %q:\n%s", field, row, change, stdout)
			}
		}
		after := installation(t, ctx, admin)
		if after.Generation != before.Generation || after.ResourceVersion != before.ResourceVersion {
			t.Errorf("the Installation changed: generation %d -> %d, resourceVersion %s -> %s",
				before.Generation, after.Generation, before.ResourceVersion, after.ResourceVersion)
		}

		// kubectl winready plan is the same command: the same document, with
		// kubectl's --context.
		withX := contextKubeconfig(t, kubeconfig, "X")
		code, kubectlJSON, stderr := runMain(t, "kubectl-winready", "plan", "-o", "json", "--kubeconfig", kubeconfig)
		if code != 0 || !json.Valid([]byte(kubectlJSON)) {
			t.Fatalf("kubectl winready plan -o json: exit status %d; stdout:\n%s\nstderr:\n%s", code, kubectlJSON, stderr)
		}
		code, winreadyJSON, stderr := runMain(t, "winready", "plan", "-o", "json", "--context", "X", "--kubeconfig", withX)
		if code != 0 || winreadyJSON != kubectlJSON {
			t.Errorf("winready plan -o json --context X: exit status %d, a different document:\n%s\nstderr:\n%s", code, winreadyJSON, stderr)
		}
		if code, _, stderr := runMain(t, "winready", "plan", "--kubeconfig", withX); code != 2 || !strings.Contains(stderr, "cannot reach the cluster") {
			t.Errorf("the kubeconfig's current context, a closed port: exit status %d, want 2; stderr:\n%s", code, stderr)
		}

		// A spec from Git shapes the targets.
		spec := writeFile(t, "wr.yaml", `apiVersion: winready.io/v1alpha1
kind: WindowsReadiness
metadata:
  name: default
spec:
  serviceCIDRs: [10.100.0.0/16]
  apiServer: {host: 10.0.0.99, port: 6443}
`)
		code, stdout, stderr = runPlanCmd(t, ctx, "--kubeconfig", kubeconfig, "--spec", spec)
		if code != 0 {
			t.Fatalf("with --spec: exit status %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		for _, want := range []string{"serviceCIDRs from spec", "API server from spec", "10.0.0.99:6443"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("with --spec: stdout lacks %q:\n%s", want, stdout)
			}
		}
		if row := rowOf(stdout, "spec.serviceCIDRs"); !slices.Equal(row[max(len(row)-2, 0):], []string{"<absent>", "[10.100.0.0/16]"}) {
			t.Errorf("with --spec: spec.serviceCIDRs row %q:\n%s", row, stdout)
		}
		if after := installation(t, ctx, admin); after.ResourceVersion != before.ResourceVersion {
			t.Errorf("with --spec: the Installation changed: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
		}
	})

	if err := calicosim.Clean(ctx, admin); err != nil {
		t.Fatal(err)
	}

	t.Run("no Installation: exit 2", func(t *testing.T) {
		code, stdout, stderr := runPlanCmd(t, ctx, "--kubeconfig", kubeconfig)
		if code != 2 || !strings.Contains(stderr, "no Installation default") {
			t.Errorf("exit status %d, want 2 and the missing Installation; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		code, stdout, stderr = runMain(t, "kubectl-winready", "plan", "-o", "yaml", "--kubeconfig", kubeconfig)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "kubectl winready: no Installation default") {
			t.Errorf("kubectl winready plan -o yaml: exit status %d, want 2, nothing on stdout and the missing Installation; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})

	t.Run("IPIP pool: the preflight fails", func(t *testing.T) {
		cl := calicosim.MainCluster()
		cl.Pools[0].Encapsulation = operatorv1.EncapsulationIPIP
		if err := calicosim.Seed(ctx, admin, cl); err != nil {
			t.Fatal(err)
		}
		if err := calicosim.WaitSettled(ctx, admin, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runPlanCmd(t, ctx, "--kubeconfig", kubeconfig)
		if code != 1 {
			t.Fatalf("exit status %d, want 1; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if row := rowOf(stdout, preflight.CheckIPIPPools); len(row) < 2 || row[1] != "Fail" {
			t.Errorf("IPIPPools row %q, want Fail:\n%s", row, stdout)
		}
		for _, want := range []string{"preflight failed", preflight.CheckIPIPPools + ": Windows has no IP-in-IP", "IPIP"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		if strings.Contains(stdout, "STEP") {
			t.Errorf("a plan was printed for a failed preflight:\n%s", stdout)
		}
		code, stdout, stderr = runMain(t, "kubectl-winready", "plan", "-o", "json", "--kubeconfig", kubeconfig)
		var res struct{ Passed *bool }
		if err := json.Unmarshal([]byte(stdout), &res); code != 1 || err != nil || res.Passed == nil || *res.Passed {
			t.Errorf("kubectl winready plan -o json: exit status %d, want 1 and a document with passed false (%v); stdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
		}
	})
}

// runMain runs the binary as name, as main does.
func runMain(t *testing.T, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = Main(append([]string{"/usr/local/bin/" + name}, args...), &out, &errs)
	return code, out.String(), errs.String()
}

// contextKubeconfig writes kubeconfig again with its one context named name
// and a current context whose server nothing listens on.
func contextKubeconfig(t *testing.T, kubeconfig, name string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	cfg.Contexts = map[string]*clientcmdapi.Context{name: kctx}
	cfg.Clusters["closed"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["broken"] = &clientcmdapi.Context{Cluster: "closed", AuthInfo: kctx.AuthInfo}
	cfg.CurrentContext = "broken"
	path := filepath.Join(t.TempDir(), "contexts.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// readerKubeconfig writes a kubeconfig for user ci-reader, bound to the
// ClusterRole winready-plan as config/rbac ships it: what winready plan reads
// and nothing more.
func readerKubeconfig(t *testing.T, ctx context.Context, env *kit.Env, admin client.Client) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "plan_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, role); err != nil {
		t.Fatalf("decoding plan_role.yaml: %v", err)
	}
	if role.Name != "winready-plan" {
		t.Fatalf("plan_role.yaml holds ClusterRole %q, want winready-plan", role.Name)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ci-reader-winready-plan"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "ci-reader"}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	user, err := env.AddUser(envtest.User{Name: "ci-reader"}, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := client.New(user.Config(), client.Options{Scheme: admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer sees the binding once its informer has it.
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := reader.List(ctx, &corev1.NodeList{})
		return err == nil, ignoreForbidden(err)
	})
	if err != nil {
		t.Fatalf("ci-reader cannot read: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "written-by-ci-reader"}}
	if err := reader.Create(ctx, cm); !apierrors.IsForbidden(err) {
		t.Fatalf("ci-reader may write (%v): the test would not show that plan only reads", err)
	}
	if data, err = user.KubeConfig(); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "ci-reader.kubeconfig", string(data))
}

func ignoreForbidden(err error) error {
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}

// installation reads the Installation with test/kit/look, failing t.
func installation(t *testing.T, ctx context.Context, c client.Client) *operatorv1.Installation {
	t.Helper()
	return look.With(ctx, gomega.NewWithT(t), c).Installation()
}

// rowOf is the fields of the first line of out that holds word as a field.
func rowOf(out, word string) []string {
	for line := range strings.Lines(out) {
		if fields := strings.Fields(line); slices.Contains(fields, word) {
			return fields
		}
	}
	return nil
}
