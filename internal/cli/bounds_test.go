package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/config/admission"
	"github.com/winready/winready/test/install"
	"github.com/winready/winready/test/kit"
)

// TestTheManagerWaitsForEveryAdmissionPolicyOfItsBuild starts the wait that
// runManager makes before it creates the manager, on a control plane without
// winready's admission policies: it answers not ready, naming what is
// missing, until the last binding exists, and then frees the probes' address
// for the manager.
func TestTheManagerWaitsForEveryAdmissionPolicyOfItsBuild(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset: make test sets it to the envtest control plane")
	}
	env, err := kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := install.Build(filepath.Join("..", "..", "config", "admission"))
	if err != nil {
		t.Fatal(err)
	}
	// The last binding Helm would create: the one the wait is left on.
	last := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "ValidatingAdmissionPolicyBinding" && o.GetName() == "winready-windows-node-gate-calico"
	})
	if last < 0 {
		t.Fatal("config/admission has no binding winready-windows-node-gate-calico")
	}
	lastBinding := objs[last]
	objs = slices.Delete(objs, last, last+1)

	addr := freeAddress(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- waitForBounds(ctx, cfg, addr, logr.Discard()) }()

	readyz(t, ctx, addr, "policy winready-admin-changes", "policy winready-windows-node-gate", "binding winready-windows-node-gate-calico")
	if err := install.Apply(ctx, c, objs); err != nil {
		t.Fatal(err)
	}
	// Once the wait has looked again after the apply, it names that
	// binding alone.
	readyz(t, ctx, addr, "policies: binding winready-windows-node-gate-calico\n")
	select {
	case err := <-done:
		t.Fatalf("the wait ended with a binding missing: %v", err)
	default:
	}
	if err := install.Apply(ctx, c, []*unstructured.Unstructured{lastBinding}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the wait ended with %v once every policy existed", err)
	}
	// The manager binds the probes' address next.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the wait left the probes' address taken: %v", err)
	}
	_ = ln.Close()
}

// TestTheManagerMayReadItsOwnAdmissionPoliciesAlone holds the manager's
// ClusterRole to config/admission: get, by name, on exactly the policies and
// bindings the wait looks for.
func TestTheManagerMayReadItsOwnAdmissionPoliciesAlone(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(data), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), role); err != nil {
			t.Fatal(err)
		}
		if role.Kind == "ClusterRole" {
			rules = append(rules, role.Rules...)
		}
	}
	want, err := admission.Names()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, "admissionregistration.k8s.io") {
			continue
		}
		if !slices.Equal(r.Verbs, []string{"get"}) {
			t.Errorf("the manager may %v admission objects: want get alone", r.Verbs)
		}
		for _, res := range r.Resources {
			got[res] = append(got[res], r.ResourceNames...)
		}
	}
	for res, names := range map[string][]string{
		"validatingadmissionpolicies":       want.Policies,
		"validatingadmissionpolicybindings": want.Bindings,
	} {
		have := slices.Sorted(slices.Values(got[res]))
		if !slices.Equal(have, names) {
			t.Errorf("the manager may get %s %v: want exactly config/admission's %v", res, have, names)
		}
		delete(got, res)
	}
	if len(got) != 0 {
		t.Errorf("the manager has rights on other admission objects: %v", got)
	}
}

// freeAddress is a local address no one listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// readyz polls the wait's /readyz until it answers 503 naming every one of
// missing, and checks that /healthz answers ok meanwhile.
func readyz(t *testing.T, ctx context.Context, addr string, missing ...string) {
	t.Helper()
	var body string
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		code, b := get(ctx, "http://"+addr+"/readyz")
		body = b
		if code != http.StatusServiceUnavailable {
			return false, nil
		}
		for _, m := range missing {
			if !strings.Contains(body, m) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("/readyz never answered 503 naming %v; last answer %q", missing, body)
	}
	if code, b := get(ctx, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answers %d %q while the manager waits: want 200, it is alive", code, b)
	}
}

// get is one GET; a failed request is code 0.
func get(ctx context.Context, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
