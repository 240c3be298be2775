package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// krewPlatforms are the platforms kubectl winready is released for.
var krewPlatforms = [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}

// licenseFile is the licence every plugin archive carries beside the binary,
// as krew-index requires.
const licenseFile = "LICENSE"

// pluginArchive packs one platform's binary as kubectl-winready (the name
// kubectl looks plugins up by) into a reproducible tar.gz and returns its
// file name and SHA-256. The licence goes in beside the binary.
func pluginArchive(out, binary, license, goos, goarch string, mtime time.Time) (string, string, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", "", err
	}
	lic, err := os.ReadFile(license)
	if err != nil {
		return "", "", fmt.Errorf("reading the licence: %w", err)
	}
	name := fmt.Sprintf("kubectl-winready_%s_%s.tar.gz", goos, goarch)
	f, err := os.Create(filepath.Join(out, name))
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{pluginBin(goos), 0o755, data}, {licenseFile, 0o644, lic}} {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return "", "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", "", err
	}
	if err := gz.Close(); err != nil {
		return "", "", err
	}
	return name, hex.EncodeToString(h.Sum(nil)), f.Close()
}

func pluginBin(goos string) string {
	if goos == "windows" {
		return "kubectl-winready.exe"
	}
	return "kubectl-winready"
}

// krewPlatform is one entry of the krew manifest's spec.platforms.
type krewPlatform struct {
	Selector map[string]map[string]string `json:"selector"`
	URI      string                       `json:"uri"`
	SHA256   string                       `json:"sha256"`
	Files    []map[string]string          `json:"files"`
	Bin      string                       `json:"bin"`
}

// krewManifest is the krew index entry (krew.googlecontainertools.github.com/v1alpha2 Plugin).
func krewManifest(version string, platforms []krewPlatform) ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "winready"},
		"spec": map[string]any{
			"version":          version,
			"homepage":         source,
			"shortDescription": "Watch and steer the migration of Calico to Windows-ready",
			"description": strings.Join([]string{
				"kubectl winready shows where winready's migration of a Calico cluster to the mode",
				"Windows nodes need stands (conditions, steps, the calico-node rollout with its",
				"pace and time left, the preflight, Windows node joins), and approves a step,",
				"pauses, resumes or rolls back, each as one patch of the WindowsReadiness.",
			}, "\n"),
			"platforms": platforms,
		},
	})
}

// buildPlugin builds kubectl winready for every krew platform, packs each and
// writes the krew manifest, winready.krew.yaml, pointing at baseURL.
func buildPlugin(o options, baseURL string) error {
	var platforms []krewPlatform
	for _, p := range krewPlatforms {
		// The plugin is the release's own winready binary for the platform;
		// the image's and the responder's are built already.
		bin, err := filepath.Abs(filepath.Join(o.out, binaryName(p[0], p[1])))
		if err != nil {
			return err
		}
		if _, err := os.Stat(bin); errors.Is(err, fs.ErrNotExist) {
			if err := goBuild(o, p[0], p[1], bin); err != nil {
				return err
			}
		}
		name, sum, err := pluginArchive(o.out, bin, filepath.Join(o.repo, licenseFile), p[0], p[1], o.epoch)
		if err != nil {
			return fmt.Errorf("packing kubectl winready for %s/%s: %w", p[0], p[1], err)
		}
		platforms = append(platforms, krewPlatform{
			Selector: map[string]map[string]string{"matchLabels": {"os": p[0], "arch": p[1]}},
			URI:      strings.TrimSuffix(baseURL, "/") + "/" + name, SHA256: sum, Bin: pluginBin(p[0]),
			Files: []map[string]string{{"from": pluginBin(p[0]), "to": "."}, {"from": licenseFile, "to": "."}}})
	}
	manifest, err := krewManifest(o.version, platforms)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, "winready.krew.yaml"), manifest, 0o644)
}
