package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMainRefusesUnknownCommand runs main itself in a child process, with no
// cluster configuration to find: an unknown command must end with status 2
// and the usage, before anything looks for a cluster.
func TestMainRefusesUnknownCommand(t *testing.T) {
	if os.Getenv("WINREADY_TEST_MAIN") == "1" {
		os.Args = []string{"winready", "plna"}
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainRefusesUnknownCommand$")
	cmd.Env = append(os.Environ(), "WINREADY_TEST_MAIN=1", "KUBECONFIG=/nonexistent", "HOME="+t.TempDir(),
		"KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("winready plna: %v, want exit status 2; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), `unknown command "plna"`) || !strings.Contains(stderr.String(), "Usage:") {
		t.Errorf("stderr lacks the usage:\n%s", stderr.String())
	}
}
