package gitopsdocs

import (
	"slices"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"sigs.k8s.io/yaml"
)

func TestArgoCDFleetIsAProgressiveApplicationSet(t *testing.T) {
	m := manifests(t, "fleet.md")
	sets := m["ApplicationSet"]
	if len(sets) != 1 {
		t.Fatalf("%d ApplicationSets in docs/fleet.md, want 1", len(sets))
	}
	var set argov1alpha1.ApplicationSet
	if err := yaml.UnmarshalStrict([]byte(sets[0]), &set); err != nil {
		t.Fatalf("not an Argo CD ApplicationSet: %v\n%s", err, sets[0])
	}
	s := set.Spec.Strategy
	if s == nil || s.Type != "RollingSync" || s.RollingSync == nil || len(s.RollingSync.Steps) < 2 {
		t.Errorf("no RollingSync of two waves at least: %+v", s)
	}
	if p := set.Spec.Template.Spec.SyncPolicy; p != nil && p.Automated != nil {
		t.Errorf("the template syncs automatically, which RollingSync turns off: %+v", p)
	}
	// The switch that turns progressive syncs on, off by default.
	var switched bool
	for _, d := range m["ConfigMap"] {
		var cm struct {
			Metadata struct{ Name string }
			Data     map[string]string
		}
		if err := yaml.Unmarshal([]byte(d), &cm); err != nil {
			t.Fatal(err)
		}
		switched = switched || cm.Metadata.Name == "argocd-cmd-params-cm" &&
			cm.Data["applicationsetcontroller.enable.progressive.syncs"] == "true"
	}
	if !switched {
		t.Error("docs/fleet.md does not turn progressive syncs on in argocd-cmd-params-cm")
	}
}

func TestArgoCDIgnoresTheFieldsThePluginForces(t *testing.T) {
	apps := manifests(t, "gitops.md")["Application"]
	if len(apps) != 1 {
		t.Fatalf("%d Applications in docs/gitops.md, want 1", len(apps))
	}
	var app argov1alpha1.Application
	if err := yaml.UnmarshalStrict([]byte(apps[0]), &app); err != nil {
		t.Fatalf("not an Argo CD Application: %v\n%s", err, apps[0])
	}
	if !slices.ContainsFunc(app.Spec.IgnoreDifferences, func(d argov1alpha1.ResourceIgnoreDifferences) bool {
		return d.Group == "winready.io" && d.Kind == "WindowsReadiness" && slices.Contains(d.ManagedFieldsManagers, "kubectl-winready")
	}) {
		t.Errorf("no ignoreDifferences for field manager kubectl-winready: %+v", app.Spec.IgnoreDifferences)
	}
	if p := app.Spec.SyncPolicy; p == nil || !slices.Contains(p.SyncOptions, "RespectIgnoreDifferences=true") {
		t.Errorf("syncOptions lack RespectIgnoreDifferences=true: %+v", p)
	}
}
