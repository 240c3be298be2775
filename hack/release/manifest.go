package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// imageName is the name config/default gives the manager's image; its images
// transform replaces it, and its replacements copy the result into
// WINREADY_IMAGE.
const imageName = "winready"

// renderInstall builds config/default as `kustomize build` does, with the
// image set as `kustomize edit set image winready=<ref>` would set it, from an
// in-memory copy of configDir so the checkout is left as it is.
func renderInstall(configDir, version, repository, digest string) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	if err := filepath.WalkDir(configDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(configDir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(filepath.Join("/config", rel), data)
	}); err != nil {
		return nil, fmt.Errorf("reading %s: %w", configDir, err)
	}
	kfile := "/config/default/kustomization.yaml"
	data, err := mem.ReadFile(kfile)
	if err != nil {
		return nil, err
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kfile, err)
	}
	k["images"] = []map[string]string{{"name": imageName, "newName": repository, "digest": digest}}
	// The manager's Deployment says which release it runs: the image is
	// pinned by digest, with no tag (kubectl winready version reads it).
	patches, _ := k["patches"].([]any)
	k["patches"] = append(patches, map[string]any{
		"target": map[string]any{"kind": "Deployment", "name": "winready-manager"},
		"patch":  fmt.Sprintf(`[{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1version", "value": %q}]`, version),
	})
	if data, err = yaml.Marshal(k); err != nil {
		return nil, err
	}
	if err := mem.WriteFile(kfile, data); err != nil {
		return nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/config/default")
	if err != nil {
		return nil, fmt.Errorf("building config/default: %w", err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	ref := repository + "@" + digest
	if !bytes.Contains(out, []byte("image: "+ref)) || !bytes.Contains(out, []byte("value: "+ref)) {
		return nil, fmt.Errorf("config/default did not take the image %s into the manager and WINREADY_IMAGE", ref)
	}
	return out, nil
}
