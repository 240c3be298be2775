// Package render is `helm template` of winready's chart with the Helm SDK:
// the objects Helm would install, CRDs first. test/chart checks them, and the
// end-to-end suite installs them (E2E_MANIFEST=chart) through the command in
// cmd/render.
package render

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

// Release is the release name and namespace the chart is rendered for, as
// docs/install.md's `helm install winready ... --namespace default` names
// them (the chart brings its own namespaces).
var Release = chartutil.ReleaseOptions{Name: "winready", Namespace: "default", IsInstall: true}

// Load reads a chart, packaged (.tgz) or a directory, and validates it.
func Load(path string) (*chart.Chart, error) {
	c, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("chart %s: %w", path, err)
	}
	return c, nil
}

// ReadValues reads a values file as helm -f does; "" is no values.
func ReadValues(path string) (map[string]any, error) {
	values := map[string]any{}
	if path == "" {
		return values, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return values, nil
}

// Values are c's values with values over them, as Helm's templates see them.
func Values(c *chart.Chart, values map[string]any) (chartutil.Values, error) {
	return chartutil.ToRenderValues(c, values, Release, chartutil.DefaultCapabilities)
}

// Objects renders c with values: the CRDs of crds/ (which helm install
// applies before the rest and never deletes), then the objects of the
// templates in the order of their file names.
func Objects(c *chart.Chart, values map[string]any) ([]map[string]any, error) {
	vals, err := Values(c, values)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	var objs []map[string]any
	for _, crd := range c.CRDObjects() {
		o, err := Decode(crd.Filename, crd.File.Data)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		o, err := Decode(name, []byte(files[name]))
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

var separator = regexp.MustCompile(`(?m)^---\s*$`)

// Decode splits a YAML stream into its objects, leaving out empty documents
// (a template whose value turned it off renders one).
func Decode(name string, data []byte) ([]map[string]any, error) {
	var objs []map[string]any
	for _, doc := range separator.Split(string(data), -1) {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", name, err, doc)
		}
		if len(obj) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs, nil
}
