// Package version is what this build of winready is: the release it belongs
// to and the commit it was built from. Release builds stamp both with
// -ldflags "-X github.com/winready/winready/internal/version.Version=v0.1.0
// -X github.com/winready/winready/internal/version.Revision=<commit>"; a
// plain go build falls back to what Go records itself: the module's version
// for `go install github.com/winready/winready@v0.1.0`, the VCS revision for a
// build in a checkout.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped at link time by make image and make release.
var (
	Version  = "dev"
	Revision = ""
)

// MinKubernetes is the oldest Kubernetes minor winready runs on: it needs
// ValidatingAdmissionPolicy v1, the node name in pod-bound ServiceAccount
// tokens, the CEL CIDR library, networking.k8s.io/v1 ServiceCIDRs and an API
// server that applies a JSON patch's test of an absent member, which
// winready's guarded patches send (json-patch v4.13.0, Kubernetes 1.35;
// docs/install.md). make test-oldest runs the core tier on it. The chart's
// kubeVersion and kubectl winready check --pre read it from here.
const MinKubernetes = "1.35"

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this build's identity. The version is the stamped one, else the
// module version `go install ...@vX` recorded, else "dev". The revision is the
// stamped one, else the commit Go recorded when it built from a checkout,
// else "unknown".
func Get() Info {
	return get(Version, Revision, debug.ReadBuildInfo)
}

func get(v, rev string, read func() (*debug.BuildInfo, bool)) Info {
	bi, ok := read()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	// go install ...@vX records the module's version; a build of the main
	// module in a checkout records "(devel)" or, with -buildvcs, a version
	// derived from the VCS, which is what it is built from too.
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if rev == "" {
		rev = "unknown"
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	return Info{Version: v, Revision: rev, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is the line `winready version` prints.
func (i Info) String() string {
	return fmt.Sprintf("winready %s (revision %s, %s, %s)", i.Version, i.Revision, i.GoVersion, i.Platform)
}
