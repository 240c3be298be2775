package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/test/install"
	"github.com/winready/winready/test/kit"
)

var testMeta = imageMeta{Version: "v0.1.0", Revision: "0123abcd", Source: source, Created: time.Unix(1764720000, 0).UTC()}

// buildFromBinaries is buildImage from given binaries, into dir.
func buildFromBinaries(t *testing.T, dir string, bins [][]byte, m imageMeta) v1.Hash {
	t.Helper()
	images := make([]v1.Image, len(platforms))
	for i, p := range platforms {
		img, err := platformImage(bins[i], p, m)
		if err != nil {
			t.Fatal(err)
		}
		images[i] = img
	}
	idx := imageIndex(images, platforms)
	h, err := writeLayout(dir, idx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := archiveLayout(dir, dir+".tar", m.Created); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestTheSameInputsGiveTheSameDigest(t *testing.T) {
	bins := [][]byte{[]byte("amd64 binary"), []byte("arm64 binary")}
	dir := t.TempDir()
	a := buildFromBinaries(t, filepath.Join(dir, "a"), bins, testMeta)
	b := buildFromBinaries(t, filepath.Join(dir, "b"), bins, testMeta)
	if a != b {
		t.Errorf("two builds of the same inputs: %s and %s", a, b)
	}
	ta, _ := os.ReadFile(filepath.Join(dir, "a.tar"))
	tb, _ := os.ReadFile(filepath.Join(dir, "b.tar"))
	if !bytes.Equal(ta, tb) {
		t.Error("the two image archives differ")
	}
	later := testMeta
	later.Created = later.Created.Add(time.Second)
	if c := buildFromBinaries(t, filepath.Join(dir, "c"), bins, later); c == a {
		t.Error("another commit time gives the same digest: the time is not in the image")
	}
	other := [][]byte{[]byte("amd64 binary!"), bins[1]}
	if d := buildFromBinaries(t, filepath.Join(dir, "d"), other, testMeta); d == a {
		t.Error("another binary gives the same digest")
	}
}

func TestTheImageIsShapedAsTheDockerfiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "image")
	buildFromBinaries(t, dir, [][]byte{[]byte("amd64 binary"), []byte("arm64 binary")}, testMeta)
	checkLayout(t, dir, testMeta, func(p v1.Platform, bin []byte) {
		if want := p.Architecture + " binary"; string(bin) != want {
			t.Errorf("%s: /winready is %q, want %q", p.Architecture, bin, want)
		}
	})
}

// checkLayout checks the image in an OCI layout: one manifest per platform
// in order, each with the Dockerfile's user, entrypoint and labels, one layer
// holding /winready; each binary goes to check.
func checkLayout(t *testing.T, dir string, m imageMeta, check func(v1.Platform, []byte)) v1.Hash {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != m.Version {
		t.Fatalf("the layout holds %+v, want one index named %s", topManifest.Manifests, m.Version)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(platforms) {
		t.Fatalf("%d manifests, want %d", len(im.Manifests), len(platforms))
	}
	for i, desc := range im.Manifests {
		if desc.Platform == nil || desc.Platform.OS != platforms[i].OS || desc.Platform.Architecture != platforms[i].Architecture {
			t.Errorf("manifest %d is for %v, want %v", i, desc.Platform, platforms[i])
			continue
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/winready" || cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture {
			t.Errorf("%s: user %q, entrypoint %q, platform %s/%s", desc.Platform.Architecture, c.User, c.Entrypoint, cf.OS, cf.Architecture)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.source":   source,
			"org.opencontainers.image.revision": m.Revision,
			"org.opencontainers.image.version":  m.Version,
		} {
			if c.Labels[k] != want {
				t.Errorf("%s: label %s = %q, want %q", desc.Platform.Architecture, k, c.Labels[k], want)
			}
		}
		if !cf.Created.Equal(m.Created) {
			t.Errorf("created %v, want the commit's time %v", cf.Created.Time, m.Created)
		}
		check(*desc.Platform, binaryOf(t, img))
	}
	return topManifest.Manifests[0].Digest
}

// binaryOf is /winready from the image's only layer.
func binaryOf(t *testing.T, img v1.Image) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatal("the layer has no winready")
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == "winready" {
			if hdr.Mode != 0o755 {
				t.Errorf("mode %o, want 755", hdr.Mode)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// TestTheReleaseAsBuilt checks what make release wrote (WINREADY_DIST): CI
// runs it through make release-check.
func TestTheReleaseAsBuilt(t *testing.T) {
	dist := os.Getenv("WINREADY_DIST")
	if dist == "" {
		t.Skip("WINREADY_DIST is not set: make release-check runs this on the release it builds")
	}
	version := os.Getenv("WINREADY_VERSION")
	rev, epoch, err := commit("../..")
	if err != nil {
		t.Fatal(err)
	}
	m := imageMeta{Version: version, Revision: rev, Source: source, Created: epoch}

	t.Run("every file has its checksum", func(t *testing.T) { checkSums(t, dist) })

	var digest v1.Hash
	t.Run("the image has both platforms and its amd64 binary runs", func(t *testing.T) {
		digest = checkLayout(t, filepath.Join(dist, "image"), m, func(p v1.Platform, bin []byte) {
			if p.Architecture != "amd64" {
				return
			}
			file := filepath.Join(t.TempDir(), "winready")
			if err := os.WriteFile(file, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(file, "version").Output()
			if err != nil {
				t.Fatalf("winready version: %v", err)
			}
			if want := "winready " + version + " (revision " + rev + ","; !strings.HasPrefix(string(out), want) {
				t.Errorf("winready version printed %q, want %q...", out, want)
			}
		})
		recorded, err := os.ReadFile(filepath.Join(dist, "image.digest"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(recorded)) != digest.String() {
			t.Errorf("image.digest says %s, the layout holds %s", recorded, digest)
		}
	})

	t.Run("a second build of the same commit has the same digest", func(t *testing.T) {
		out := t.TempDir()
		again, err := buildImage(options{version: version, revision: rev, out: out, repo: "../..", epoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		if again != digest.String() {
			t.Errorf("rebuilt %s, released %s", again, digest)
		}
	})

	t.Run("the krew manifest passes krew's validation and names the archives", func(t *testing.T) { checkKrew(t, dist) })

	t.Run("install.yaml pins the image by digest and applies cleanly", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		ref := "/winready@" + digest.String()
		if n := strings.Count(string(data), "image: "+repository(t)+ref) + strings.Count(string(data), "value: "+repository(t)+ref); n != 2 {
			t.Errorf("install.yaml names the image by digest %d times, want 2 (the manager and WINREADY_IMAGE)", n)
		}
		if strings.Contains(string(data), "winready:dev") {
			t.Error("install.yaml still names winready:dev")
		}
		applyToEnvtest(t, filepath.Join(dist, "install.yaml"))
	})
}

// repository is where the release's manifest points (WINREADY_REGISTRY).
func repository(t *testing.T) string {
	t.Helper()
	reg := os.Getenv("WINREADY_REGISTRY")
	if reg == "" {
		t.Fatal("WINREADY_REGISTRY is not set")
	}
	return strings.TrimSuffix(reg, "/")
}

// checkKrew checks that every platform of winready.krew.yaml names an
// archive of the release by its checksum, holding the plugin's binary;
// test/krew validates the manifest against krew's own types.
func checkKrew(t *testing.T, dist string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dist, "winready.krew.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Spec struct {
			Platforms []krewPlatform `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != len(krewPlatforms) {
		t.Errorf("%d platforms, want %d", len(m.Spec.Platforms), len(krewPlatforms))
	}
	for _, pl := range m.Spec.Platforms {
		archive := filepath.Join(dist, filepath.Base(pl.URI))
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != pl.SHA256 {
			t.Errorf("%s: the manifest's sha256 is not the archive's", archive)
		}
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		hdr, err := tr.Next()
		if err != nil || hdr.Name != pl.Bin || hdr.Mode != 0o755 {
			t.Errorf("%s holds %v (%v), want %s", archive, hdr, err, pl.Bin)
		}
		if hdr, err = tr.Next(); err != nil || hdr.Name != licenseFile {
			t.Errorf("%s holds no %s after the binary: %v (%v)", archive, licenseFile, hdr, err)
		}
		if !slices.ContainsFunc(pl.Files, func(f map[string]string) bool { return f["from"] == licenseFile }) {
			t.Errorf("%s: the krew manifest does not install %s", archive, licenseFile)
		}
	}
}

func checkSums(t *testing.T, dist string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		sum, name, ok := strings.Cut(s.Text(), "  ")
		if !ok {
			t.Fatalf("line %q", s.Text())
		}
		data, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: checksum differs", name)
		}
		listed[name] = true
	}
	for _, want := range []string{"install.yaml", "image.digest", "winready-image.tar", "sbom.cdx.json", "winready.krew.yaml",
		"kubectl-winready_linux_amd64.tar.gz", "kubectl-winready_windows_amd64.tar.gz",
		"kubectl-winready_darwin_amd64.tar.gz", "kubectl-winready_darwin_arm64.tar.gz",
		"winready.exe", "winready-linux-amd64", "winready-linux-arm64"} {
		if !listed[want] {
			t.Errorf("SHA256SUMS does not list %s", want)
		}
	}
	if charts, _ := filepath.Glob(filepath.Join(dist, "winready-*.tgz")); len(charts) != 1 || !listed[filepath.Base(charts[0])] {
		t.Errorf("the release's chart packages %v, want one, listed in SHA256SUMS", charts)
	}
}

// applyToEnvtest creates every object of the manifest on a fresh envtest API
// server, as kubectl apply -f does on an empty cluster.
func applyToEnvtest(t *testing.T, manifest string) {
	t.Helper()
	env, err := kit.Environment(kit.Options{CalicoCRDSet: kit.NoCalicoCRDs, NoWinreadyCRD: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (KUBEBUILDER_ASSETS): %v", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := install.ReadManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 10 {
		t.Fatalf("install.yaml has %d objects", len(objs))
	}
	// A Calico cluster has the namespaces where winready's Roles live.
	if err := install.CreateNamespacesOf(context.Background(), c, objs); err != nil {
		t.Fatal(err)
	}
	if err := install.Apply(context.Background(), c, objs); err != nil {
		t.Error(err)
	}
}

func TestPluginArchivesHoldTheBinaryAndTheLicense(t *testing.T) {
	dir := t.TempDir()
	bin, lic := filepath.Join(dir, "bin"), filepath.Join(dir, "LICENSE")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lic, []byte("Apache License"), 0o644); err != nil {
		t.Fatal(err)
	}
	name, _, err := pluginArchive(dir, bin, lic, "darwin", "arm64", testMeta.Created)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(data)
	}
	if name != "kubectl-winready_darwin_arm64.tar.gz" || files["kubectl-winready"] != "binary" || files["LICENSE"] != "Apache License" || len(files) != 2 {
		t.Errorf("%s holds %v", name, files)
	}
}

func TestTheRepositoryHasTheApacheLicense(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", licenseFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("LICENSE lacks %q", want)
		}
	}
}
