package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// craneTool is the crane docs/install.md mirrors with, at the version make
// publish pins.
const craneTool = "github.com/google/go-containerregistry/cmd/crane@v0.22.1"

// TestMirroringAsDocumentedKeepsThePinnedDigest pushes the image's OCI layout
// to a registry with `crane push <layout dir>`, as docs/install.md says, and
// pulls the pinned digest back, with the manifest of linux/amd64 and of
// linux/arm64 and their blobs.
func TestMirroringAsDocumentedKeepsThePinnedDigest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs crane from the module proxy")
	}
	dir := filepath.Join(t.TempDir(), "image")
	pinned := buildFromBinaries(t, dir, [][]byte{[]byte("amd64 binary"), []byte("arm64 binary")}, testMeta)

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cmd := exec.Command("go", "run", craneTool, "push", "--insecure", dir, host+"/mirror/winready:v0.1.0")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("crane push: %v\n%s", err, out)
	}

	get := func(path, accept string) []byte {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v2/mirror/winready/"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, data)
		}
		return data
	}
	const indexType, manifestType = "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json"
	raw := get("manifests/"+pinned.String(), indexType)
	if h, _, _ := v1.SHA256(strings.NewReader(string(raw))); h != pinned {
		t.Fatalf("the registry served %s for the pinned %s", h, pinned)
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, m := range index.Manifests {
		if m.Platform == nil {
			t.Fatalf("a manifest without a platform in %s", raw)
		}
		p := m.Platform.OS + "/" + m.Platform.Architecture
		found[p] = true
		var man v1.Manifest
		if err := json.Unmarshal(get("manifests/"+m.Digest.String(), manifestType), &man); err != nil {
			t.Fatal(err)
		}
		for _, l := range append(man.Layers, man.Config) {
			get("blobs/"+l.Digest.String(), "*/*")
		}
	}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		if !found[p] {
			t.Errorf("the pinned index has no %s manifest: %s", p, raw)
		}
	}
}
