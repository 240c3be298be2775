package version

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestGetPrefersTheStampedRevision(t *testing.T) {
	read := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fromvcs"}}}, true
	}
	for _, tc := range []struct {
		name, rev, want string
		read            func() (*debug.BuildInfo, bool)
	}{
		{"stamped", "abc123", "abc123", read},
		{"from the checkout Go built", "", "fromvcs", read},
		{"neither", "", "unknown", func() (*debug.BuildInfo, bool) { return nil, false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := get("v0.1.0", tc.rev, tc.read)
			if got.Revision != tc.want || got.Version != "v0.1.0" {
				t.Errorf("got %+v, want revision %s", got, tc.want)
			}
			if !strings.HasPrefix(got.String(), "winready v0.1.0 (revision "+tc.want+", go") {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
}

func TestGoInstallBuildsTakeTheModuleVersion(t *testing.T) {
	info := func(version string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Path: "github.com/winready/winready", Version: version}}, true
		}
	}
	for _, tc := range []struct {
		name, stamped, module, want string
	}{
		{"go install ...@v0.2.0", "dev", "v0.2.0", "v0.2.0"},
		{"a build in a checkout", "dev", "(devel)", "dev"},
		{"no build info", "dev", "", "dev"},
		{"a release build is stamped", "v0.1.0", "v0.2.0", "v0.1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := get(tc.stamped, "abc", info(tc.module)).Version; got != tc.want {
				t.Errorf("version %q, want %q", got, tc.want)
			}
		})
	}
}

// The claim is tested: make test-oldest runs the core tier on K8S_OLDEST, a
// patch of exactly the minor MinKubernetes names, and the docs that state
// the claim state that minor.
func TestTheOldestMinorClaimedIsTheOneTested(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^K8S_OLDEST \?= (\d+\.\d+)\.\d+$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("no K8S_OLDEST ?= <major>.<minor>.<patch> in the Makefile")
	}
	if string(m[1]) != MinKubernetes {
		t.Errorf("the Makefile's K8S_OLDEST is a patch of %s, MinKubernetes is %s: test the minor claimed", m[1], MinKubernetes)
	}
	for _, doc := range []string{"README.md", filepath.Join("docs", "install.md")} {
		b, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(b)), " "), "Kubernetes "+MinKubernetes+" or newer") {
			t.Errorf("%s does not say it needs Kubernetes %s or newer", doc, MinKubernetes)
		}
	}
}
