package kit_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	calicov3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/test/kit"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	os.Exit(m.Run())
}

// Ginkgo suites start the kit with GinkgoT().
var _ kit.T = ginkgo.GinkgoT()

var calicoCRDs = filepath.Join("..", "..", "bin", "crds")

func TestNewRefusesASeedWithoutTheInstallation(t *testing.T) {
	pool := "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata:\n  name: p\nspec:\n  cidr: 10.1.0.0/16\n"
	inst := func(name string) string {
		return "apiVersion: operator.tigera.io/v1\nkind: Installation\nmetadata:\n  name: " + name + "\n"
	}
	for _, tc := range []struct{ name, seed, want string }{
		{"empty", "", "no Installation named default"},
		{"pools only", pool, "no Installation named default"},
		{"another name", inst("main"), `Installation "main": the Tigera operator reads one Installation, named default`},
		{"two", inst("default") + "---\n" + inst("default"), "the Tigera operator reads one Installation"},
		{"no kind", "metadata:\n  name: x\n", "an object without kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kit.New(context.Background(), kit.Options{Seed: []byte(tc.seed), CalicoCRDs: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestNewSaysWhereCalicosCRDsComeFrom(t *testing.T) {
	t.Setenv(kit.CalicoCRDsEnv, "")
	_, err := kit.New(context.Background(), kit.Options{Seed: []byte(clusterYAML)})
	if err == nil || !strings.Contains(err.Error(), "WINREADY_CALICO_CRDS") || !strings.Contains(err.Error(), "hack/calico-crds.sh") {
		t.Fatalf("New: %v, want an error naming WINREADY_CALICO_CRDS and hack/calico-crds.sh", err)
	}
}

func TestEnvironmentHasTheCRDsAsked(t *testing.T) {
	t.Setenv(kit.CalicoCRDsEnv, "")
	operator, calico := filepath.Join("crds", "operator"), filepath.Join("crds", "calico")
	for _, tc := range []struct {
		name     string
		opts     kit.Options
		winready bool
		dirs     []string
	}{
		{"all", kit.Options{CalicoCRDs: "crds"}, true, []string{operator, calico}},
		{"the operator's only", kit.Options{CalicoCRDs: "crds", CalicoCRDSet: kit.OperatorCRDsOnly}, true, []string{operator}},
		{"no Calico, no directory needed", kit.Options{CalicoCRDSet: kit.NoCalicoCRDs}, true, nil},
		{"bare", kit.Options{CalicoCRDSet: kit.NoCalicoCRDs, NoWinreadyCRD: true}, false, nil},
		{"further directories", kit.Options{CalicoCRDs: "crds", CRDDirectories: []string{"mine"}}, true, []string{operator, calico, "mine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := kit.Environment(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(env.CRDs) == 1; got != tc.winready {
				t.Errorf("winready's CRD: %d CRDs, want it %v", len(env.CRDs), tc.winready)
			}
			if !slices.Equal(env.CRDDirectoryPaths, tc.dirs) {
				t.Errorf("CRD directories %q, want %q", env.CRDDirectoryPaths, tc.dirs)
			}
			if !env.ErrorIfCRDPathMissing || env.CRDInstallOptions.MaxTime != kit.CRDInstallWait {
				t.Errorf("a missing directory is no error, or the CRDs wait %v", env.CRDInstallOptions.MaxTime)
			}
		})
	}
}

func TestNewRefusesAControlPlaneWithoutItsCRDs(t *testing.T) {
	for _, opts := range []kit.Options{
		{Seed: []byte(clusterYAML), CalicoCRDs: calicoCRDs, NoWinreadyCRD: true},
		{Seed: []byte(clusterYAML), CalicoCRDs: calicoCRDs, CalicoCRDSet: kit.OperatorCRDsOnly},
	} {
		_, err := kit.New(context.Background(), opts)
		if err == nil || !strings.Contains(err.Error(), "are for Environment") {
			t.Errorf("New: %v, want an error saying the options are for Environment", err)
		}
	}
}

func TestNewRefusesASeedObjectOfAnUnservedKind(t *testing.T) {
	widget := "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"
	c, err := kit.New(context.Background(), kit.Options{Seed: []byte(clusterYAML + widget), CalicoCRDs: calicoCRDs})
	if c != nil || err == nil || !strings.Contains(err.Error(), "applying the seed's Widget /w") {
		t.Fatalf("New: %v, want no cluster and an error naming the Widget", err)
	}
}

// An export with `kubectl get -o yaml`: a List, with what the API server set.
const exportedPoolYAML = `
apiVersion: v1
kind: List
items:
- apiVersion: projectcalico.org/v3
  kind: IPPool
  metadata:
    name: extra-pool
    resourceVersion: "4711"
    uid: 1c1f4d3e-0000-4000-8000-000000000000
    creationTimestamp: "2026-01-02T03:04:05Z"
  spec:
    cidr: 172.30.0.0/16
    vxlanMode: CrossSubnet
    ipipMode: Never
    natOutgoing: true
    blockSize: 26
    nodeSelector: all()
- apiVersion: projectcalico.org/v3
  kind: IPAMConfiguration
  metadata:
    name: default
  spec:
    strictAffinity: false
    autoAllocateBlocks: true
    maxBlocksPerHost: 20
`

func TestAClusterSeededWithAPoolOutsideTheInstallation(t *testing.T) {
	c := kit.Start(t, kit.Options{Seed: []byte(clusterYAML + "---\n" + exportedPoolYAML), CalicoCRDs: calicoCRDs,
		Timeout: time.Minute})
	t.Run("validation is strict: an unknown field is refused", func(t *testing.T) {
		err := c.Validate(context.Background(), []byte(strings.Replace(wrYAML, "serviceCIDRs", "serviceCIDR", 1)))
		if err == nil || !strings.Contains(err.Error(), `unknown field "spec.serviceCIDR"`) {
			t.Fatalf("Validate: %v, want the unknown field refused", err)
		}
	})
	t.Run("a failed preflight stops before any change", func(t *testing.T) { failedPreflight(t, c) })
	t.Run("a rollback's dry run has no preflight, and no change where nothing was changed", func(t *testing.T) {
		rollback := strings.Replace(wrYAML, "spec:", "spec:\n  direction: Rollback", 1)
		plan, err := c.Plan(context.Background(), []byte(rollback))
		if err != nil || plan.Preflight.Reason != "" || plan.Changes != nil {
			t.Fatalf("Plan: %+v, %v; want no preflight and no change", plan, err)
		}
		if _, err := c.Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), "a rollback runs no preflight") {
			t.Fatalf("Preflight: %v, want it to say a rollback runs none", err)
		}
	})
}

func failedPreflight(t *testing.T, c *kit.Cluster) {
	ctx := context.Background()
	plan, err := c.Plan(ctx, []byte(wrYAML))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Preflight.Passed || plan.Preflight.Reason != "PreflightFailed" || plan.Changes != nil {
		t.Fatalf("the pool outside the Installation fails the preflight and leaves no plan: %+v", plan)
	}
	failed := plan.Preflight.Failed()
	if len(failed) != 1 || failed[0].Name != "PoolsOutsideInstallation" || !strings.Contains(failed[0].Message, "extra-pool") {
		t.Fatalf("failed checks: %+v, want PoolsOutsideInstallation naming extra-pool", failed)
	}

	if _, err := c.Apply(ctx, []byte(wrYAML)); err != nil {
		t.Fatal(err)
	}
	v, err := c.Preflight(ctx)
	if err != nil || v.Passed || len(v.Failed()) != 1 {
		t.Fatalf("Preflight: %+v, %v; want the failed verdict without a dry run too", v, err)
	}
	_, err = c.WaitPhase(ctx, v1alpha1.PhaseReady)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Stalled (PreflightFailed)") {
		t.Fatalf("WaitPhase(Ready): %v, want it to end as soon as winready stalls on the preflight", err)
	}
	ipam := &calicov3.IPAMConfiguration{}
	if err := c.Client().Get(ctx, client.ObjectKey{Name: "default"}, ipam); err != nil {
		t.Fatal(err)
	}
	if ipam.Spec.StrictAffinity || ipam.Spec.MaxBlocksPerHost != 20 {
		t.Fatalf("the seed's IPAMConfiguration, unchanged: %+v", ipam.Spec)
	}
}

func TestEnvironmentGivesKubeAPIServerTheFlagsOfItsVariable(t *testing.T) {
	t.Setenv(kit.APIServerFlagsEnv, "--watch-cache=false  --max-requests-inflight=50")
	env, err := kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs})
	if err != nil {
		t.Fatal(err)
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	for name, want := range map[string]string{"watch-cache": "false", "max-requests-inflight": "50"} {
		if got := args.Get(name).Get(nil); !slices.Equal(got, []string{want}) {
			t.Errorf("--%s: %q, want %q", name, got, want)
		}
	}

	for _, bad := range []string{"watch-cache=false", "--watch-cache", "--=x"} {
		t.Setenv(kit.APIServerFlagsEnv, bad)
		if _, err := kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs}); err == nil ||
			!strings.Contains(err.Error(), kit.APIServerFlagsEnv) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error naming %s and the flag", bad, err, kit.APIServerFlagsEnv)
		}
	}
}
