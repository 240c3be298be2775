// Command winready runs the WindowsReadiness operator; internal/cli has its
// commands.
package main

import (
	"os"

	"github.com/winready/winready/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr))
}
