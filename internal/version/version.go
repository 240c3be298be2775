// Package version is what this build of winready is: the release it belongs
// to and the commit it was built from. Release builds stamp both with
// -ldflags "-X github.com/winready/winready/internal/version.Version=v0.1.0
// -X github.com/winready/winready/internal/version.Revision=<commit>"; a
// plain go build falls back to the VCS information Go records itself.
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

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this build's identity. The revision is the stamped one, else
// the commit Go recorded when it built from a checkout, else "unknown".
func Get() Info {
	return get(Version, Revision, debug.ReadBuildInfo)
}

func get(v, rev string, read func() (*debug.BuildInfo, bool)) Info {
	if rev == "" {
		rev = "unknown"
		if bi, ok := read(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					rev = s.Value
				}
			}
		}
	}
	return Info{Version: v, Revision: rev, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is the line `winready version` prints.
func (i Info) String() string {
	return fmt.Sprintf("winready %s (revision %s, %s, %s)", i.Version, i.Revision, i.GoVersion, i.Platform)
}
