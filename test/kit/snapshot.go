package kit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// SnapshotsEnv names the environment variable Options.Snapshots defaults to.
const SnapshotsEnv = "WINREADY_ENVTEST_SNAPSHOTS"

// snapshotUnused is how long a snapshot nobody started from is kept.
const snapshotUnused = 7 * 24 * time.Hour

// errNoLocking is the answer of lockFile where files cannot be locked: the
// control plane then installs its CRDs.
var errNoLocking = errors.New("kit: no file locks on this system")

// Env is the envtest environment Environment returns: envtest's own, with
// its fields, whose Start begins, when it has a directory of snapshots, from
// etcd's data as it was once its CRDs were installed, rather than installing
// them. Installing Calico's CRDs is most of a control plane's start: the
// Installation's schema alone is 1.5 MB, which the API server validates,
// stores and compiles, then writes each CRD's status. From a snapshot the
// API server reads them back from etcd: a start costs about half the CPU.
type Env struct {
	*envtest.Environment

	// snapshots is the directory of snapshots, empty for none.
	snapshots string
	// dataDir is etcd's copy of a snapshot, which Stop removes.
	dataDir string
}

// Start starts the control plane with its CRDs served, from a snapshot when
// there is a directory of them: the first start of a set of CRDs on a
// control plane's binaries installs them once more into a snapshot, which
// every later start (of any process) copies; a control plane's own data is
// never shared. The environment's CRDs then list every CRD served, as
// envtest's own Start leaves them.
func (e *Env) Start() (*rest.Config, error) {
	if e.snapshots == "" || e.ControlPlane.Etcd != nil {
		return e.Environment.Start()
	}
	crds, err := e.readCRDs()
	if err != nil {
		return nil, err
	}
	key, err := snapshotKey([]string{binaryPath("kube-apiserver", e.BinaryAssetsDirectory), binaryPath("etcd", e.BinaryAssetsDirectory)}, crds)
	if err != nil {
		return nil, err
	}
	snapshot, err := e.snapshot(key, crds)
	if errors.Is(err, errNoLocking) {
		return e.Environment.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("the snapshot of the control plane's CRDs in %s: %w", e.snapshots, err)
	}
	if e.dataDir, err = os.MkdirTemp("", "kit-etcd-"); err != nil {
		return nil, err
	}
	if err := copyDir(e.dataDir, snapshot); err != nil {
		return nil, errors.Join(err, os.RemoveAll(e.dataDir))
	}
	e.ControlPlane.Etcd = &envtest.Etcd{DataDir: e.dataDir}
	own, dirs := e.CRDs, e.CRDDirectoryPaths
	e.CRDs, e.CRDDirectoryPaths = nil, nil
	cfg, err := e.Environment.Start()
	e.CRDs, e.CRDDirectoryPaths = own, dirs
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(e.dataDir))
	}
	// The API server serves a CRD read from etcd once its informer has it:
	// wait, as envtest waits for the CRDs it installs.
	if err := envtest.WaitForCRDs(cfg, crds, e.waitOptions()); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	e.CRDs = crds
	return cfg, nil
}

// Stop stops the control plane and removes etcd's copy of the snapshot.
func (e *Env) Stop() error {
	err := e.Environment.Stop()
	if e.dataDir != "" {
		err = errors.Join(err, os.RemoveAll(e.dataDir))
		e.dataDir = ""
	}
	return err
}

// readCRDs are the CRDs the environment installs: its own and those of its
// directories, as envtest reads them.
func (e *Env) readCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	opts := envtest.CRDInstallOptions{Paths: e.CRDDirectoryPaths, ErrorIfPathMissing: e.ErrorIfCRDPathMissing}
	if err := envtest.ReadCRDFiles(&opts); err != nil {
		return nil, err
	}
	crds := append(slices.Clone(e.CRDs), opts.CRDs...)
	slices.SortFunc(crds, func(a, b *apiextensionsv1.CustomResourceDefinition) int { return strings.Compare(a.Name, b.Name) })
	return crds, nil
}

// waitOptions wait for the CRDs as envtest's install does, with its
// defaults where the environment sets none.
func (e *Env) waitOptions() envtest.CRDInstallOptions {
	opts := e.CRDInstallOptions
	if opts.MaxTime == 0 {
		opts.MaxTime = 10 * time.Second
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 100 * time.Millisecond
	}
	return opts
}

// snapshot is the directory of etcd's data with crds installed, made once
// under a lock any other process starting the same set waits for.
func (e *Env) snapshot(key string, crds []*apiextensionsv1.CustomResourceDefinition) (string, error) {
	if err := os.MkdirAll(e.snapshots, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(e.snapshots, key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	dir := filepath.Join(e.snapshots, key)
	if _, err := os.Stat(dir); err == nil {
		now := time.Now()
		return dir, os.Chtimes(dir, now, now)
	}
	partial := dir + ".partial"
	if err := os.RemoveAll(partial); err != nil {
		return "", err
	}
	if err := e.install(partial, crds); err != nil {
		return "", errors.Join(err, os.RemoveAll(partial))
	}
	if err := os.Rename(partial, dir); err != nil {
		return "", err
	}
	return dir, pruneSnapshots(e.snapshots, key)
}

// install runs a control plane on dataDir only to install crds into it.
func (e *Env) install(dataDir string, crds []*apiextensionsv1.CustomResourceDefinition) error {
	copies := make([]*apiextensionsv1.CustomResourceDefinition, len(crds))
	for i, crd := range crds {
		copies[i] = crd.DeepCopy()
	}
	env := &envtest.Environment{
		CRDs:                     copies,
		CRDInstallOptions:        e.waitOptions(),
		BinaryAssetsDirectory:    e.BinaryAssetsDirectory,
		ControlPlaneStartTimeout: e.ControlPlaneStartTimeout,
		ControlPlaneStopTimeout:  e.ControlPlaneStopTimeout,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: dataDir}
	_, err := env.Start()
	return errors.Join(err, env.Stop())
}

// snapshotKey names a set of CRDs on a control plane's binaries: their
// content, and the binaries' size and time.
func snapshotKey(binaries []string, crds []*apiextensionsv1.CustomResourceDefinition) (string, error) {
	h := sha256.New()
	for _, bin := range binaries {
		path, err := filepath.Abs(bin)
		if err != nil {
			return "", err
		}
		info, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("the control plane's binaries (Options.ControlPlane or KUBEBUILDER_ASSETS): %w", err)
		}
		fmt.Fprintf(h, "%s %d %d\n", path, info.Size(), info.ModTime().UnixNano())
	}
	for _, crd := range crds {
		data, err := json.Marshal(crd)
		if err != nil {
			return "", err
		}
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// binaryPath is the control plane binary envtest runs, found as envtest
// finds it: TEST_ASSET_<NAME>, then KUBEBUILDER_ASSETS, then the
// environment's directory, then /usr/local/kubebuilder/bin.
func binaryPath(name, assets string) string {
	if path, ok := os.LookupEnv("TEST_ASSET_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
		return path
	}
	if dir, ok := os.LookupEnv("KUBEBUILDER_ASSETS"); ok {
		return filepath.Join(dir, name)
	}
	if assets != "" {
		return filepath.Join(assets, name)
	}
	return filepath.Join("/usr/local/kubebuilder/bin", name)
}

// pruneSnapshots removes the snapshots no start has used for a week, but
// keep's.
func pruneSnapshots(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, entry := range entries {
		if !entry.IsDir() || entry.Name() == keep || strings.HasSuffix(entry.Name(), ".partial") {
			continue
		}
		info, err := entry.Info()
		if err != nil || time.Since(info.ModTime()) < snapshotUnused {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dir, entry.Name())), os.Remove(filepath.Join(dir, entry.Name()+".lock")))
	}
	return errors.Join(errs...)
}

// copyDir copies the files of src into dst, which exists, with their
// permissions: etcd wants its directories private.
func copyDir(dst, src string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(target, info.Mode().Perm())
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		return errors.Join(err, out.Close())
	})
}
