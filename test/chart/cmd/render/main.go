// Command render writes what `helm template` renders of winready's chart, as
// one YAML stream with the CRDs first:
//
//	go run ./cmd/render [-f values.yaml] dist/winready-0.1.0.tgz > chart.yaml
//
// The end-to-end suite installs winready from it (E2E_MANIFEST=chart).
package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/winready/winready/test/chart/render"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run() error {
	valuesFile := flag.String("f", "", "a values file, as helm template -f reads it")
	flag.Parse()
	if flag.NArg() != 1 {
		return fmt.Errorf("usage: render [-f values.yaml] CHART")
	}
	c, err := render.Load(flag.Arg(0))
	if err != nil {
		return err
	}
	values, err := render.ReadValues(*valuesFile)
	if err != nil {
		return err
	}
	objs, err := render.Objects(c, values)
	if err != nil {
		return err
	}
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if _, err := fmt.Printf("---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}
