// Package krew checks the krew manifest make release writes against krew's
// own index types, strictly decoded, and the rules krew's index validation
// applies (sigs.k8s.io/krew v0.4.3, internal/index/validation, which other
// modules cannot import). A module of its own: krew requires a client-go
// that winready's module must not take.
package krew

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/krew/pkg/index"
	"sigs.k8s.io/yaml"
)

var sha256Pattern = regexp.MustCompile(`^[a-f0-9]{64}$`)

func TestTheReleasesKrewManifestIsValid(t *testing.T) {
	dist := os.Getenv("WINREADY_DIST")
	if dist == "" {
		t.Skip("WINREADY_DIST is not set: make release-check runs this on the release it builds")
	}
	data, err := os.ReadFile(filepath.Join(dist, "winready.krew.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p index.Plugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatalf("winready.krew.yaml is not a krew Plugin: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Name != "winready" {
		t.Errorf("apiVersion %q kind %q name %q", p.APIVersion, p.Kind, p.Name)
	}
	if p.Spec.ShortDescription == "" || strings.ContainsAny(p.Spec.ShortDescription, "\r\n") || !semver.IsValid(p.Spec.Version) {
		t.Errorf("shortDescription %q, version %q", p.Spec.ShortDescription, p.Spec.Version)
	}
	if len(p.Spec.Platforms) == 0 {
		t.Fatal("no platform")
	}
	for _, pl := range p.Spec.Platforms {
		sel := pl.Selector
		if sel == nil || len(sel.MatchLabels) == 0 || len(sel.MatchExpressions) > 0 {
			t.Errorf("platform %+v: krew needs a matchLabels selector", pl)
		}
		for k := range sel.MatchLabels {
			if k != "os" && k != "arch" {
				t.Errorf("platform %+v: selector key %q is not supported by krew", pl, k)
			}
		}
		if pl.URI == "" || pl.Bin == "" || !sha256Pattern.MatchString(pl.Sha256) {
			t.Errorf("platform %+v: uri, bin and a sha256 are required", pl)
		}
		if pl.Files != nil && len(pl.Files) == 0 {
			t.Errorf("platform %+v: files must be unset or non-empty", pl)
		}
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" {
				t.Errorf("platform %+v: a file needs from and to", pl)
			}
		}
	}
}
