package admission

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNamesAreEveryPolicyAndBinding counts the objects in the files as a
// reader would, so that Names cannot quietly skip a file or a document.
func TestNamesAreEveryPolicyAndBinding(t *testing.T) {
	o, err := Names()
	if err != nil {
		t.Fatal(err)
	}
	kinds := regexp.MustCompile(`(?m)^kind: (ValidatingAdmissionPolicy|ValidatingAdmissionPolicyBinding)$`)
	policies, bindings := 0, 0
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") || e.Name() == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range kinds.FindAllStringSubmatch(string(data), -1) {
			if m[1] == "ValidatingAdmissionPolicy" {
				policies++
			} else {
				bindings++
			}
		}
	}
	if len(o.Policies) != policies || len(o.Bindings) != bindings || policies == 0 {
		t.Errorf("Names found %d policies and %d bindings, the files hold %d and %d (is every file in kustomization.yaml?)",
			len(o.Policies), len(o.Bindings), policies, bindings)
	}
	// kubectl winready check finds them by name; uninstalling by the
	// prefix and the part-of label (docs/install.md).
	for _, n := range append(slices.Clone(o.Policies), o.Bindings...) {
		if !strings.HasPrefix(n, "winready-") {
			t.Errorf("%s is not named winready-*", n)
		}
	}
}
