package kit_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/controllers"
	"github.com/winready/winready/test/kit"
)

// snapshotsIn are the snapshots a directory holds.
func snapshotsIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestAControlPlaneStartsFromTheSnapshotOfItsCRDs(t *testing.T) {
	snapshots := t.TempDir()
	// winready's CRD alone: the cheapest set to install twice over.
	opts := kit.Options{CalicoCRDSet: kit.NoCalicoCRDs, Snapshots: snapshots}
	first, err := kit.Environment(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Start(); err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	made := snapshotsIn(t, snapshots)
	if len(made) != 1 {
		t.Fatalf("snapshots after the first start: %q, want one", made)
	}

	// creationTimestamp is in whole seconds: a CRD the first start installed
	// was created before this; one the second start installed would be
	// created once its API server is up, seconds after.
	startedAt := time.Now()
	second, err := kit.Environment(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := second.Start()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := second.ControlPlane.Etcd.DataDir
	scheme, err := controllers.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "windowsreadinesses.winready.io"}, crd); err != nil {
		t.Fatal(err)
	}
	if !crd.CreationTimestamp.Time.Before(startedAt) {
		t.Errorf("the WindowsReadiness CRD was created at %v, by the second start (at %v): want it read from the snapshot",
			crd.CreationTimestamp, startedAt)
	}
	// Served as soon as Start returns, as after envtest's own install.
	wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name}}
	if err := c.Create(ctx, wr); err != nil {
		t.Errorf("creating a WindowsReadiness right after the start: %v", err)
	}
	if len(second.CRDs) != 1 || len(first.CRDs) != 1 {
		t.Errorf("the environments list %d and %d CRDs, want winready's", len(first.CRDs), len(second.CRDs))
	}

	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("etcd's copy %s after Stop: %v, want it removed", dataDir, err)
	}
	if again := snapshotsIn(t, snapshots); len(again) != 1 || again[0] != made[0] {
		t.Errorf("snapshots after the second start: %q, want only %q", again, made)
	}
	if _, err := os.Stat(filepath.Join(snapshots, made[0], "member")); err != nil {
		t.Errorf("the snapshot lost etcd's data: %v", err)
	}
}
