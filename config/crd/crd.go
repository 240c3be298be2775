// Package crd carries winready's CustomResourceDefinitions, as generated into
// bases/ by `make manifests`, inside the Go binary, so that a test suite in
// another module can install them on its envtest control plane without a
// checkout of winready.
package crd

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

// CRDs returns winready's CustomResourceDefinitions (today the one of
// WindowsReadiness), ready for envtest.Environment.CRDs.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(paths))
	for _, p := range paths {
		data, err := bases.ReadFile(p)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", p, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
