package kit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestASnapshotIsKeyedOnTheCRDsAndTheBinaries(t *testing.T) {
	assets := t.TempDir()
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(assets, bin), []byte(bin), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	crd := func(name string, served bool) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: served}}}}
	}
	key := func(crds ...*apiextensionsv1.CustomResourceDefinition) string {
		t.Helper()
		k, err := snapshotKey([]string{filepath.Join(assets, "kube-apiserver"), filepath.Join(assets, "etcd")}, crds)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := key(crd("a.x.io", true), crd("b.x.io", true))
	if again := key(crd("a.x.io", true), crd("b.x.io", true)); again != base {
		t.Errorf("the same CRDs give %s then %s", base, again)
	}
	for name, other := range map[string]string{
		"a CRD fewer":      key(crd("a.x.io", true)),
		"a CRD changed":    key(crd("a.x.io", true), crd("b.x.io", false)),
		"another CRD name": key(crd("a.x.io", true), crd("c.x.io", true)),
	} {
		if other == base {
			t.Errorf("%s: the same key %s", name, base)
		}
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(assets, "kube-apiserver"), later, later); err != nil {
		t.Fatal(err)
	}
	if other := key(crd("a.x.io", true), crd("b.x.io", true)); other == base {
		t.Errorf("another kube-apiserver binary: the same key %s", base)
	}
	if _, err := snapshotKey([]string{filepath.Join(t.TempDir(), "etcd")}, nil); err == nil {
		t.Errorf("no binaries: no error")
	}
}

func TestTheSnapshotKeysTheBinariesEnvtestRuns(t *testing.T) {
	t.Setenv("TEST_ASSET_KUBE_APISERVER", "/x/kube-apiserver")
	t.Setenv("TEST_ASSET_ETCD", "") // restored after the test
	os.Unsetenv("TEST_ASSET_ETCD")
	t.Setenv("KUBEBUILDER_ASSETS", "/assets")
	if got := binaryPath("kube-apiserver", "/mine"); got != "/x/kube-apiserver" {
		t.Errorf("with TEST_ASSET_KUBE_APISERVER: %s", got)
	}
	if got := binaryPath("etcd", "/mine"); got != "/assets/etcd" {
		t.Errorf("with KUBEBUILDER_ASSETS and a directory of the environment's: %s, want KUBEBUILDER_ASSETS's, as envtest", got)
	}
	os.Unsetenv("KUBEBUILDER_ASSETS")
	if got := binaryPath("etcd", "/mine"); got != "/mine/etcd" {
		t.Errorf("with the environment's directory alone: %s", got)
	}
	if got := binaryPath("etcd", ""); got != "/usr/local/kubebuilder/bin/etcd" {
		t.Errorf("with nothing set: %s", got)
	}
}

func TestSnapshotsUnusedForAWeekArePruned(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-snapshotUnused - time.Hour)
	for _, name := range []string{"old", "recent", "kept"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".lock"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if name != "recent" {
			if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pruneSnapshots(dir, "kept"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"old": false, "old.lock": false, "recent": true, "recent.lock": true, "kept": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: stat %v, want it there: %v", name, err, want)
		}
	}
}
