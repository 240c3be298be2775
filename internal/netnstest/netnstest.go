// Package netnstest holds what the network namespace tests share: the rule
// that decides whether they may run here.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Require skips the test when it cannot make network namespaces: not root,
// or one of tools missing from PATH. With WINREADY_REQUIRE_NETNS=1, as CI
// sets, that is a failure instead, so the tests never pass by being skipped.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	var missing, absent []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			absent = append(absent, tool)
		}
	}
	if len(absent) > 0 {
		missing = append(missing, fmt.Sprintf("%s in PATH (apt-get install iproute2 nftables iputils-ping)",
			strings.Join(absent, ", ")))
	}
	if len(missing) == 0 {
		return
	}
	msg := "network namespace tests need " + strings.Join(missing, " and ")
	if os.Getenv("WINREADY_REQUIRE_NETNS") == "1" {
		t.Fatalf("%s; WINREADY_REQUIRE_NETNS=1 forbids skipping them", msg)
	}
	t.Skip(msg + "; skipped")
}
