package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// What every part of a release shares: where it comes from, its platforms,
// its options, and the build of the winready binary.

const (
	source = "https://github.com/winready/winready"
	// The SBOM tool, run from the module proxy at a pinned version.
	sbomTool = "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0"
)

// The image's platforms, in the order of its index.
var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// options are the release's flags and what run derives from them.
type options struct {
	version   string
	revision  string
	registry  string
	out       string
	repo      string
	downloads string
	epoch     time.Time
}

// goBuild builds the winready binary for one platform, static and
// reproducible: no cgo, no paths, no build ID, no VCS stamp (the revision is
// stamped explicitly).
func goBuild(o options, goos, goarch, file string) error {
	pkg := "github.com/winready/winready/internal/version"
	ldflags := fmt.Sprintf("-s -w -buildid= -X %s.Version=%s -X %s.Revision=%s", pkg, o.version, pkg, o.revision)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", file, ".")
	cmd.Dir = o.repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building winready for %s/%s: %w", goos, goarch, err)
	}
	return nil
}

// binaryName is a platform's binary in dist/.
func binaryName(goos, goarch string) string {
	if goos == "windows" {
		return "winready.exe"
	}
	return "winready-" + goos + "-" + goarch
}
