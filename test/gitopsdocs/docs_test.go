// Package gitopsdocs decodes the manifests of docs/gitops.md and
// docs/fleet.md into Flux's and Argo CD's own API types, strictly, so that
// a field the tools do not know, or one in the wrong place, fails here
// rather than in a platform team's repository. A module of its own: the
// project's go.mod takes no Flux or Argo CD dependency.
package gitopsdocs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"sigs.k8s.io/yaml"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// manifests are the YAML documents of the doc, by kind.
func manifests(t *testing.T, doc string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range yamlBlock.FindAllStringSubmatch(string(data), -1) {
		for _, d := range strings.Split(m[1], "\n---\n") {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal([]byte(d), &meta); err != nil {
				t.Fatalf("%s: %v\n%s", doc, err, d)
			}
			out[meta.Kind] = append(out[meta.Kind], d)
		}
	}
	return out
}

func kustomizations(t *testing.T, doc string) []kustomizev1.Kustomization {
	t.Helper()
	var ks []kustomizev1.Kustomization
	for _, d := range manifests(t, doc)["Kustomization"] {
		var k kustomizev1.Kustomization
		if err := yaml.UnmarshalStrict([]byte(d), &k); err != nil {
			t.Errorf("%s: not a Flux Kustomization: %v\n%s", doc, err, d)
			continue
		}
		if k.APIVersion != kustomizev1.GroupVersion.String() {
			t.Errorf("%s: Kustomization %s has apiVersion %s", doc, k.Name, k.APIVersion)
		}
		ks = append(ks, k)
	}
	return ks
}

func TestFluxInGitOpsDoesNotHoldNewRevisions(t *testing.T) {
	ks := kustomizations(t, "gitops.md")
	if len(ks) != 2 {
		t.Fatalf("%d Kustomizations, want the one that applies and the one that waits", len(ks))
	}
	apply, ready := ks[0], ks[1]
	if apply.Spec.Wait || len(apply.Spec.HealthChecks) > 0 {
		t.Errorf("%s waits: a new revision would be held back during the migration", apply.Name)
	}
	if ready.Spec.Wait {
		t.Errorf("%s has wait: true, which ignores its healthChecks", ready.Name)
	}
	if len(ready.Spec.HealthChecks) != 1 || ready.Spec.HealthChecks[0].Kind != "WindowsReadiness" ||
		!slices.ContainsFunc(ready.Spec.DependsOn, func(d kustomizev1.DependencyReference) bool { return d.Name == apply.Name }) {
		t.Errorf("%s does not wait for the WindowsReadiness %s applies: %+v", ready.Name, apply.Name, ready.Spec)
	}
	if ready.Spec.Timeout == nil || ready.Spec.Timeout.Hours() < 48 {
		t.Errorf("%s times out after %v", ready.Name, ready.Spec.Timeout)
	}
}

func TestFluxFleetHasAKustomizationPerCluster(t *testing.T) {
	ks := kustomizations(t, "fleet.md")
	if len(ks) < 3 {
		t.Fatalf("%d Kustomizations, want one per cluster of two waves at least", len(ks))
	}
	names := map[string]bool{}
	paths := map[string]bool{}
	secrets := map[string]bool{}
	for _, k := range ks {
		names[k.Name] = true
		if k.Spec.KubeConfig == nil || k.Spec.KubeConfig.SecretRef == nil || secrets[k.Spec.KubeConfig.SecretRef.Name] {
			t.Errorf("%s: no kubeConfig of its own: %+v", k.Name, k.Spec.KubeConfig)
		} else {
			secrets[k.Spec.KubeConfig.SecretRef.Name] = true
		}
		if paths[k.Spec.Path] {
			t.Errorf("%s: path %s is another cluster's (each cluster's WindowsReadiness is default)", k.Name, k.Spec.Path)
		}
		paths[k.Spec.Path] = true
		if !k.Spec.Wait || k.Spec.Timeout == nil || k.Spec.Timeout.Hours() < 48 {
			t.Errorf("%s: not Ready only once its cluster is (wait %t, timeout %v)", k.Name, k.Spec.Wait, k.Spec.Timeout)
		}
	}
	for i, k := range ks[1:] {
		if len(k.Spec.DependsOn) == 0 {
			t.Errorf("%s depends on no earlier wave", k.Name)
		}
		for _, d := range k.Spec.DependsOn {
			if !names[d.Name] || !slices.ContainsFunc(ks[:i+1], func(e kustomizev1.Kustomization) bool { return e.Name == d.Name }) {
				t.Errorf("%s depends on %s, not a cluster of an earlier wave", k.Name, d.Name)
			}
		}
	}
}
