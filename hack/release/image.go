package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image runs as this user, the distroless "nonroot" one: the manager's
// Deployment sets runAsNonRoot, and an empty base has no /etc/passwd to
// resolve a name.
const imageUser = "65532:65532"

// entrypoint is where the binary sits in the image.
const entrypoint = "/winready"

// imageMeta is what the image says about itself, in its OCI labels and its
// layout's ref name.
type imageMeta struct {
	Version  string
	Revision string
	Source   string
	// Created is every timestamp in the image: the commit's time, so the same
	// commit gives the same digest.
	Created time.Time
}

func (m imageMeta) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   m.Source,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.title":    "winready",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// platformImage is one platform's image: the static binary on an empty base.
func platformImage(binary []byte, p v1.Platform, m imageMeta) (v1.Image, error) {
	layer, err := binaryLayer(binary, m.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: m.Created}, CreatedBy: "winready hack/release", Comment: "the winready binary"},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the binary layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: m.Created}
	cf.Config.User = imageUser
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.Labels = m.labels()
	cf.Config.Env = nil
	return mutate.ConfigFile(img, cf)
}

// binaryLayer is a tar of the one file, with fixed owner, mode and time so
// that the same binary always gives the same layer digest.
func binaryLayer(binary []byte, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Name:     entrypoint[1:],
		Mode:     0o755,
		Size:     int64(len(binary)),
		ModTime:  mtime,
		Typeflag: tar.TypeReg,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// imageIndex is the multi-platform image: one manifest per platform, in the
// order given.
func imageIndex(images []v1.Image, platforms []v1.Platform) v1.ImageIndex {
	adds := make([]mutate.IndexAddendum, len(images))
	for i, img := range images {
		p := platforms[i]
		adds[i] = mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}}
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
}

// writeLayout writes idx as an OCI image layout in dir, tagged with the
// version, and returns the index's digest.
func writeLayout(dir string, idx v1.ImageIndex, m imageMeta) (v1.Hash, error) {
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("writing the image layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": m.Version,
	})); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the image index: %w", err)
	}
	return idx.Digest()
}

// archiveLayout tars the layout in dir into file, with sorted names, fixed
// owners and times: an OCI archive that `docker load` (Docker 25 or later),
// `skopeo copy oci-archive:` and `crane push` take.
func archiveLayout(dir, file string, mtime time.Time) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			paths = append(paths, path)
		}
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(paths)
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer out.Close()
	tw := tar.NewWriter(out)
	for _, path := range paths {
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Format: tar.FormatPAX}
		if info.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return out.Close()
}
