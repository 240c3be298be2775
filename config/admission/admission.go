// Package admission carries the names of winready's admission policies and
// their bindings, read from the files kustomization.yaml lists, inside the Go
// binary: kubectl winready check compares the cluster with what this build
// installs, and a list kept by hand would drift from config/admission.
package admission

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"slices"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Objects are the names of the ValidatingAdmissionPolicies and the
// ValidatingAdmissionPolicyBindings install.yaml holds, each sorted.
type Objects struct {
	Policies []string
	Bindings []string
}

// Names reads the objects of the files kustomization.yaml lists: a file in
// the directory that kustomize does not take is not installed either.
func Names() (Objects, error) {
	data, err := files.ReadFile("kustomization.yaml")
	if err != nil {
		return Objects{}, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return Objects{}, fmt.Errorf("decoding kustomization.yaml: %w", err)
	}
	var o Objects
	for _, name := range k.Resources {
		data, err := files.ReadFile(name)
		if err != nil {
			return Objects{}, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return Objects{}, fmt.Errorf("decoding %s: %w", name, err)
			}
			switch obj.Kind {
			case "ValidatingAdmissionPolicy":
				o.Policies = append(o.Policies, obj.Metadata.Name)
			case "ValidatingAdmissionPolicyBinding":
				o.Bindings = append(o.Bindings, obj.Metadata.Name)
			}
		}
	}
	slices.Sort(o.Policies)
	slices.Sort(o.Bindings)
	return o, nil
}
