// Command release builds winready's image without a Docker engine and writes
// a release a platform team installs with one `kubectl apply -f`:
//
//	go run ./hack/release image   --version v0.1.0            # dist/image: OCI layout, two platforms
//	go run ./hack/release release --version v0.1.0 --registry ghcr.io/winready
//	go run ./hack/release manifests --version v0.1.0 --digest sha256:...   # install.yaml and the chart only
//
// The image is the same as the Dockerfile's: a static, -trimpath binary as
// /winready, user 65532, with OCI labels; every timestamp is the commit's, so
// the same commit gives the same digest.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "image" && args[0] != "release" && args[0] != "manifests") {
		return errors.New("usage: release image|release|manifests [--version v0.1.0] [--registry REGISTRY] [--out dist] [--digest sha256:...]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	o := options{}
	fs.StringVar(&o.version, "version", "dev", "the version stamped into the binary and the image")
	fs.StringVar(&o.registry, "registry", "ghcr.io/winready", "the registry the manifest points at: the image is REGISTRY/winready@sha256:<digest>")
	fs.StringVar(&o.out, "out", "dist", "where to write")
	fs.StringVar(&o.repo, "repo", ".", "the checkout to build")
	fs.StringVar(&o.downloads, "downloads", "", "where the release's files are published, for the krew manifest; default the GitHub release of --version")
	pinned := fs.String("digest", "", "manifests: the image digest install.yaml and the chart pin (default: OUT/image.digest, as make image writes it)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var err error
	if o.revision, o.epoch, err = commit(o.repo); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if args[0] == "manifests" {
		if *pinned == "" {
			data, err := os.ReadFile(filepath.Join(o.out, "image.digest"))
			if err != nil {
				return fmt.Errorf("no --digest and no image digest: %w (make image writes it)", err)
			}
			*pinned = strings.TrimSpace(string(data))
		}
		return writeManifests(o, *pinned)
	}
	digest, err := buildImage(o)
	if err != nil {
		return err
	}
	fmt.Printf("image %s (%s, revision %s)\n", digest, o.version, o.revision)
	if args[0] == "image" {
		return nil
	}
	return buildRelease(o, digest)
}

// commit is HEAD's hash and time: the revision label and every timestamp of
// the image. SOURCE_DATE_EPOCH, when set, overrides the time.
func commit(repo string) (string, time.Time, error) {
	out, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%H %ct").Output()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading the commit of %s: %w", repo, err)
	}
	rev, ts, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		ts = e
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("commit time %q: %w", ts, err)
	}
	return rev, time.Unix(sec, 0).UTC(), nil
}

// buildImage builds the binaries of the image's platforms into out and the
// image from them into out/image (an OCI layout) and out/winready-image.tar;
// it writes the index digest to out/image.digest and returns it.
func buildImage(o options) (string, error) {
	meta := imageMeta{Version: o.version, Revision: o.revision, Source: source, Created: o.epoch}
	images := make([]v1.Image, len(platforms))
	for i, p := range platforms {
		file, err := filepath.Abs(filepath.Join(o.out, binaryName(p.OS, p.Architecture)))
		if err != nil {
			return "", err
		}
		if err := goBuild(o, p.OS, p.Architecture, file); err != nil {
			return "", err
		}
		bin, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		if images[i], err = platformImage(bin, p, meta); err != nil {
			return "", fmt.Errorf("image for %s/%s: %w", p.OS, p.Architecture, err)
		}
	}
	idx := imageIndex(images, platforms)
	h, err := writeLayout(filepath.Join(o.out, "image"), idx, meta)
	if err != nil {
		return "", err
	}
	if err := archiveLayout(filepath.Join(o.out, "image"), filepath.Join(o.out, "winready-image.tar"), o.epoch); err != nil {
		return "", fmt.Errorf("archiving the image layout: %w", err)
	}
	digest := h.String()
	return digest, os.WriteFile(filepath.Join(o.out, "image.digest"), []byte(digest+"\n"), 0o644)
}

// buildRelease writes the rest of the release beside the image: the Windows
// responder, install.yaml pinned to the image's digest, the SBOM, kubectl
// winready's archives with their krew manifest, and the checksums of every
// file. With a cosign key (COSIGN_KEY, COSIGN_PASSWORD) it signs the image
// index, the chart package and SHA256SUMS (hack/sign) and adds winready.pub.
func buildRelease(o options, digest string) error {
	exe, err := filepath.Abs(filepath.Join(o.out, binaryName("windows", "amd64")))
	if err != nil {
		return err
	}
	if err := goBuild(o, "windows", "amd64", exe); err != nil {
		return err
	}
	if err := writeManifests(o, digest); err != nil {
		return err
	}
	if err := sbom(o); err != nil {
		return err
	}
	downloads := o.downloads
	if downloads == "" {
		downloads = source + "/releases/download/" + o.version
	}
	if err := buildPlugin(o, downloads); err != nil {
		return err
	}
	sign, cleanup, err := signer(o)
	if err != nil {
		return err
	}
	defer cleanup()
	if sign != nil {
		charts, err := filepath.Glob(filepath.Join(o.out, "winready-*.tgz"))
		if err != nil {
			return fmt.Errorf("finding the chart package to sign: %w", err)
		}
		if len(charts) != 1 {
			return fmt.Errorf("want one chart package to sign in %s, found %v", o.out, charts)
		}
		image := strings.TrimSuffix(o.registry, "/") + "/winready@" + digest
		if err := sign("--image", image, "--blob", filepath.Base(charts[0])); err != nil {
			return err
		}
	}
	if err := checksums(o.out); err != nil {
		return err
	}
	if sign != nil {
		return sign("--blob", "SHA256SUMS")
	}
	return nil
}

// signer builds hack/sign (a module of its own, so that winready's go.mod
// does not carry cosign) and returns a function that runs it on the
// release with the key of COSIGN_KEY; without COSIGN_KEY, none: the release
// is unsigned, and says so.
func signer(o options) (sign func(args ...string) error, cleanup func(), err error) {
	if os.Getenv("COSIGN_KEY") == "" {
		fmt.Println("unsigned: COSIGN_KEY is not set, so the release has no signatures and no winready.pub")
		return nil, func() {}, nil
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "winready-sign")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	bin := filepath.Join(tmp, "sign")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(o.repo, "hack", "sign")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("building hack/sign: %w", err)
	}
	return func(args ...string) error {
		cmd := exec.Command(bin, append([]string{"--dist", out}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("signing the release: %w", err)
		}
		return nil
	}, cleanup, nil
}

// writeManifests writes install.yaml pinned to the image's digest and, from
// the same kustomize build, the Helm chart: its directory (out/chart/winready)
// and its package (out/winready-<chart version>.tgz).
func writeManifests(o options, digest string) error {
	repository := strings.TrimSuffix(o.registry, "/") + "/winready"
	config := filepath.Join(o.repo, "config")
	manifest, err := renderInstall(config, o.version, repository, digest)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("# winready %s (revision %s): kubectl apply -f install.yaml\n# image %s@%s\n", o.version, o.revision, repository, digest)
	if err := os.WriteFile(filepath.Join(o.out, "install.yaml"), append([]byte(header), manifest...), 0o644); err != nil {
		return err
	}
	chartDir := filepath.Join(o.out, "chart")
	if err := writeChart(config, chartDir, o.version, manifest, repository, digest); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	file, err := packageChart(chartDir, o.out, o.epoch)
	if err != nil {
		return fmt.Errorf("packaging the chart: %w", err)
	}
	fmt.Printf("chart %s\n", file)
	return nil
}

// sbom writes the CycloneDX SBOM of the Go modules linked into the image's
// binary (linux/amd64; the arm64 one links the same modules).
func sbom(o options) error {
	out, err := filepath.Abs(filepath.Join(o.out, "sbom.cdx.json"))
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "run", sbomTool, "app", "-json", "-noserial", "-output", out, "-main", ".", ".")
	cmd.Dir = o.repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64",
		"SOURCE_DATE_EPOCH="+strconv.FormatInt(o.epoch.Unix(), 10))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("writing the SBOM: %w", err)
	}
	return nil
}

// checksums writes SHA256SUMS for the release's files, as sha256sum -c reads it.
func checksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var lines []string
	for _, e := range entries {
		if e.IsDir() || e.Name() == "SHA256SUMS" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		lines = append(lines, hex.EncodeToString(sum[:])+"  "+e.Name())
	}
	slices.Sort(lines)
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
