package version

import (
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
