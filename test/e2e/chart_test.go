package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/winready/winready/test/install"
)

// chartMirror is the image repository the chart is installed with: a
// mirror's, as docs/install.md mirrors the image, which sets the manager's
// image and WINREADY_IMAGE without a rebuild. Nothing pulls it: the suite
// runs the binary itself, and kwok plays the pods.
const chartMirror = "registry.example.com/mirror/winready"

// mirrorValues are the chart's values that pull from chartMirror: its
// registry and its repository there, as docs/install.md mirrors the image.
var mirrorValues = []byte("image:\n  registry: " + strings.SplitN(chartMirror, "/", 2)[0] +
	"\n  repository: " + strings.SplitN(chartMirror, "/", 2)[1] + "\n")

// chartDigest is the digest the chart built from the checkout pins.
const chartDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// chartManifest is winready as `helm install` of its chart installs it
// (E2E_MANIFEST=chart, or the path of a chart package such as a release's
// dist/winready-<version>.tgz): the chart hack/release generates from the
// checkout's config/, rendered by test/chart's render command, which is
// `helm template` with the Helm SDK (CRDs first). The rendered stream is
// kept in the log directory. Rendered once: the upgrade scenario installs
// today's winready again.
var chartManifest = sync.OnceValues(func() ([]*unstructured.Unstructured, error) {
	dir, err := filepath.Abs(filepath.Join(logDir, "chart"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pkg := os.Getenv("E2E_MANIFEST")
	if pkg == "chart" {
		if pkg, err = buildChart(repoRoot, dir); err != nil {
			return nil, err
		}
	}
	if pkg, err = filepath.Abs(pkg); err != nil {
		return nil, err
	}
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, mirrorValues, 0o644); err != nil {
		return nil, err
	}
	rendered := filepath.Join(dir, "rendered.yaml")
	out, err := goRun(filepath.Join(repoRoot, "test", "chart"), "./cmd/render", "-f", values, pkg)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(rendered, out, 0o644); err != nil {
		return nil, err
	}
	objs, err := install.ReadManifest(rendered)
	if err != nil {
		return nil, err
	}
	return objs, mirrored(objs)
})

// mirrored checks that the chart took the mirror into the manager's image
// and WINREADY_IMAGE alike, which runAsInstalled hands the binary.
func mirrored(objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != managerDeployment {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c, _ := c.(map[string]any)
			if c["name"] != "manager" {
				continue
			}
			image, _ := c["image"].(string)
			env, _ := c["env"].([]any)
			for _, e := range env {
				if e, _ := e.(map[string]any); e["name"] == "WINREADY_IMAGE" && e["value"] == image &&
					strings.HasPrefix(image, chartMirror+"@sha256:") {
					return nil
				}
			}
			return fmt.Errorf("the chart's manager runs %q with env %v: want the mirror %s in both", image, env, chartMirror)
		}
	}
	return fmt.Errorf("the chart renders no Deployment %s with a manager container", managerDeployment)
}

// buildChart generates the chart from config/ of the checkout at root into
// dir, as make chart does but with a digest of no image (nothing pulls it),
// and returns its package.
func buildChart(root, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := goRun(root, "./hack/release", "manifests", "--version", "e2e", "--registry", "ghcr.io/winready",
		"--digest", chartDigest, "--out", dir); err != nil {
		return "", err
	}
	pkgs, err := filepath.Glob(filepath.Join(dir, "winready-*.tgz"))
	if err != nil {
		return "", err
	}
	if len(pkgs) != 1 {
		return "", fmt.Errorf("want one chart package in %s, found %v", dir, pkgs)
	}
	return pkgs[0], nil
}

// goRun runs `go run` in dir and returns its standard output.
func goRun(dir string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"run"}, args...)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go run %s in %s: %w\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// isChart says whether E2E_MANIFEST names the chart rather than a manifest.
func isChart(manifest string) bool {
	return manifest == "chart" || strings.HasSuffix(manifest, ".tgz")
}
