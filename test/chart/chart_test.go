// Package chart checks the Helm chart hack/release generates from config/:
// rendered by the Helm SDK, with default values it gives the objects of the
// release's install.yaml, and its values set what they say.
package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"

	"github.com/winready/winready/test/chart/render"
)

// digest is the image digest the chart is generated with when no release
// is given.
const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// registry is the registry the release's image is published to:
// WINREADY_REGISTRY (make release-check's REGISTRY) with WINREADY_DIST, else
// the one the chart is generated with here.
func registry() string {
	if r := os.Getenv("WINREADY_REGISTRY"); r != "" && os.Getenv("WINREADY_DIST") != "" {
		return r
	}
	return "ghcr.io/winready"
}

var root = filepath.Join("..", "..")

// release is a directory holding install.yaml and the chart's package:
// WINREADY_DIST (make release-check's dist/), else what `hack/release
// manifests` writes from this checkout's config/.
func release(t *testing.T) (dir, chartDigest string) {
	t.Helper()
	if dist := os.Getenv("WINREADY_DIST"); dist != "" {
		data, err := os.ReadFile(filepath.Join(dist, "image.digest"))
		if err != nil {
			t.Fatal(err)
		}
		return dist, strings.TrimSpace(string(data))
	}
	dir = t.TempDir()
	cmd := exec.Command("go", "run", "./hack/release", "manifests", "--version", "v0.1.0",
		"--registry", registry(), "--digest", digest, "--out", dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release manifests: %v\n%s", err, out)
	}
	return dir, digest
}

func loadChart(t *testing.T, dir string) *chart.Chart {
	t.Helper()
	pkgs, err := filepath.Glob(filepath.Join(dir, "winready-*.tgz"))
	if err != nil || len(pkgs) != 1 {
		t.Fatalf("want one chart package in %s, found %v (%v)", dir, pkgs, err)
	}
	c, err := render.Load(pkgs[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// renderChart is `helm template` of c with values: the CRDs of crds/ (which
// helm install applies first) and the templates' objects.
func renderChart(t *testing.T, c *chart.Chart, values map[string]any) []map[string]any {
	t.Helper()
	objs, err := render.Objects(c, values)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func decode(t *testing.T, name string, data []byte) []map[string]any {
	t.Helper()
	objs, err := render.Decode(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func key(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	return fmt.Sprintf("%s %v/%v", obj["kind"], meta["namespace"], meta["name"])
}

func byKey(t *testing.T, objs []map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		k := key(o)
		if _, dup := out[k]; dup {
			t.Errorf("%s twice", k)
		}
		out[k] = o
	}
	return out
}

func asJSON(v any) string {
	data, _ := json.MarshalIndent(v, "", "  ")
	return string(data)
}

func TestDefaultValuesRenderInstallYAML(t *testing.T) {
	dir, pinned := release(t)
	install, err := os.ReadFile(filepath.Join(dir, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := byKey(t, decode(t, "install.yaml", install))
	// The chart keeps the namespaces on helm uninstall (the record of the
	// originals lives in winready-system) and, by crds.keep, the CRD.
	for _, w := range want {
		if w["kind"] == "Namespace" || w["kind"] == "CustomResourceDefinition" {
			meta := w["metadata"].(map[string]any)
			meta["annotations"] = merged(meta["annotations"], map[string]any{"helm.sh/resource-policy": "keep"})
		}
	}
	got := byKey(t, renderChart(t, loadChart(t, dir), nil))
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart lacks %s", k)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s differs:\nchart:\n%s\ninstall.yaml:\n%s", k, asJSON(g), asJSON(w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, which install.yaml lacks", k)
		}
	}
	if len(want) < 10 || !strings.Contains(string(install), "@"+pinned) {
		t.Fatalf("install.yaml holds %d objects and pins %s: not a release's", len(want), pinned)
	}
}

func TestValuesSetWhatTheySay(t *testing.T) {
	dir, _ := release(t)
	c := loadChart(t, dir)
	const mirror = "registry.example.com/mirror/winready"
	values := map[string]any{}
	if err := yaml.Unmarshal([]byte(`
image: {registry: registry.example.com, repository: mirror/winready, digest: "`+digest+`"}
replicas: 3
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 512Mi}}
nodeSelector: {kubernetes.io/os: linux, pool: system}
tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
priorityClassName: system-cluster-critical
commonAnnotations: {argocd.argoproj.io/sync-wave: "-1"}
serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}}
prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}
`), &values); err != nil {
		t.Fatal(err)
	}
	objs := byKey(t, renderChart(t, c, values))
	dep := objs["Deployment winready-system/winready-manager"]
	if dep == nil {
		t.Fatal("no Deployment winready-system/winready-manager")
	}
	ref := mirror + "@" + digest
	spec := dep["spec"].(map[string]any)
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	container := pod["containers"].([]any)[0].(map[string]any)
	var env string
	for _, e := range container["env"].([]any) {
		if e := e.(map[string]any); e["name"] == "WINREADY_IMAGE" {
			env, _ = e["value"].(string)
		}
	}
	for what, pair := range map[string][2]any{
		"image":             {container["image"], ref},
		"WINREADY_IMAGE":    {env, ref},
		"replicas":          {spec["replicas"], float64(3)},
		"resources":         {container["resources"], values["resources"]},
		"nodeSelector":      {pod["nodeSelector"], values["nodeSelector"]},
		"tolerations":       {pod["tolerations"], values["tolerations"]},
		"priorityClassName": {pod["priorityClassName"], "system-cluster-critical"},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: %s, want %s", what, asJSON(pair[0]), asJSON(pair[1]))
		}
	}
	for k, obj := range objs {
		ann, _ := obj["metadata"].(map[string]any)["annotations"].(map[string]any)
		if ann["argocd.argoproj.io/sync-wave"] != "-1" {
			t.Errorf("%s lacks commonAnnotations: %v", k, ann)
		}
	}
	// The monitoring objects are config/prometheus's, with the annotations
	// added, the labels on what a Prometheus selects, and the runbooks at
	// the release's tag.
	for _, file := range []string{"servicemonitor.yaml", "prometheusrule.yaml", "scraper.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, "config", "prometheus", file))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("/winready/blob/main/"), []byte("/winready/blob/"+c.Metadata.AppVersion+"/"))
		for _, want := range decode(t, file, data) {
			meta := want["metadata"].(map[string]any)
			if kind := want["kind"]; kind == "ServiceMonitor" || kind == "PrometheusRule" {
				meta["labels"].(map[string]any)["release"] = "kube-prometheus-stack"
			}
			meta["annotations"] = merged(meta["annotations"], map[string]any{"argocd.argoproj.io/sync-wave": "-1"})
			k := key(want)
			if got := objs[k]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\nchart:\n%s\nwant:\n%s", k, asJSON(got), asJSON(want))
			}
		}
	}

	// Without a digest the chart refuses to render: the image is pinned.
	if _, err := engine.Render(c, mustRenderValues(t, c, map[string]any{"image": map[string]any{"digest": ""}})); err == nil ||
		!strings.Contains(err.Error(), "image.digest is required") {
		t.Errorf("rendering without a digest: %v, want image.digest is required", err)
	}
}

func mustRenderValues(t *testing.T, c *chart.Chart, values map[string]any) chartutil.Values {
	t.Helper()
	vals, err := render.Values(c, values)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// merged is the map m (nil or a map[string]any) with add's entries added.
func merged(m any, add map[string]any) map[string]any {
	out := map[string]any{}
	if m, ok := m.(map[string]any); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

// TestServiceMonitorBringsItsCredentials: serviceMonitor.enabled renders the
// Secret the ServiceMonitor's authorization names, a ServiceAccount token
// whose ServiceAccount is bound to winready-metrics-reader, and not the
// PrometheusRule, which has a value of its own.
func TestServiceMonitorBringsItsCredentials(t *testing.T) {
	dir, _ := release(t)
	objs := byKey(t, renderChart(t, loadChart(t, dir), map[string]any{"serviceMonitor": map[string]any{"enabled": true}}))
	sm := objs["ServiceMonitor winready-system/winready"]
	if sm == nil {
		t.Fatal("serviceMonitor.enabled renders no ServiceMonitor")
	}
	if _, ok := objs["PrometheusRule winready-system/winready"]; ok {
		t.Error("serviceMonitor.enabled renders the PrometheusRule")
	}
	endpoints := sm["spec"].(map[string]any)["endpoints"].([]any)
	if len(endpoints) != 1 {
		t.Fatalf("%d endpoints", len(endpoints))
	}
	ep := endpoints[0].(map[string]any)
	if _, ok := ep["bearerTokenFile"]; ok {
		t.Error("the ServiceMonitor reads a token file, which the Prometheus operator deprecates")
	}
	auth, _ := ep["authorization"].(map[string]any)
	creds, _ := auth["credentials"].(map[string]any)
	if auth["type"] != "Bearer" || creds["key"] != "token" {
		t.Fatalf("authorization %s, want a Bearer token from a Secret's key token", asJSON(auth))
	}
	secret := objs[fmt.Sprintf("Secret winready-system/%v", creds["name"])]
	if secret == nil {
		t.Fatalf("no Secret winready-system/%v rendered beside the ServiceMonitor", creds["name"])
	}
	sa, _ := secret["metadata"].(map[string]any)["annotations"].(map[string]any)["kubernetes.io/service-account.name"].(string)
	if secret["type"] != "kubernetes.io/service-account-token" || sa == "" {
		t.Fatalf("Secret %v is not a ServiceAccount token: %s", creds["name"], asJSON(secret))
	}
	if objs["ServiceAccount winready-system/"+sa] == nil {
		t.Errorf("no ServiceAccount winready-system/%s rendered for its token", sa)
	}
	bound := false
	for _, o := range objs {
		if o["kind"] != "ClusterRoleBinding" {
			continue
		}
		ref := o["roleRef"].(map[string]any)
		for _, s := range o["subjects"].([]any) {
			s := s.(map[string]any)
			if ref["kind"] == "ClusterRole" && ref["name"] == "winready-metrics-reader" &&
				s["kind"] == "ServiceAccount" && s["name"] == sa && s["namespace"] == "winready-system" {
				bound = true
			}
		}
	}
	if !bound {
		t.Errorf("ServiceAccount %s is not bound to winready-metrics-reader", sa)
	}
}

// TestTheValuesSchemaRefusesWhatTheChartDoesNotKnow: Helm checks the values
// against values.schema.json before rendering, so a misspelt key or a value
// of the wrong type fails the install with its name instead of being
// ignored or rendered into something else.
func TestTheValuesSchemaRefusesWhatTheChartDoesNotKnow(t *testing.T) {
	dir, _ := release(t)
	c := loadChart(t, dir)
	if c.Schema == nil {
		t.Fatal("the chart has no values.schema.json")
	}
	for _, tc := range []struct{ values, want string }{
		{`imagePullSecret: [{name: x}]`, "imagePullSecret"},
		{`image: {tag: v0.1.0}`, "tag"},
		{`replicas: "3"`, "replicas"},
		{`replicas: 0`, "replicas"},
		{`extraArgs: --zap-log-level=debug`, "extraArgs"},
		{`extraEnv: [{value: x}]`, "name"},
		{`podLabels: {team: 1}`, "team"},
		{`serviceMonitor: {enable: true}`, "enable"},
	} {
		values := map[string]any{}
		if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
			t.Fatal(err)
		}
		if _, err := render.Values(c, values); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %s: %v, want an error naming %s", tc.values, err, tc.want)
		}
	}
	// Every value of values.yaml is one the schema knows, and so is every
	// value the other tests set.
	if _, err := render.Values(c, nil); err != nil {
		t.Errorf("the default values: %v", err)
	}
}

// TestWhatAnUninstallKeepsAndWhoEditsAreValues: by default the CRD and the
// namespaces carry Helm's keep policy and winready-editor is aggregated
// nowhere; the values crds.keep, crds.enabled and rbac.aggregateToEdit
// change exactly that.
func TestWhatAnUninstallKeepsAndWhoEditsAreValues(t *testing.T) {
	dir, _ := release(t)
	c := loadChart(t, dir)
	const crd = "CustomResourceDefinition <nil>/windowsreadinesses.winready.io"
	const editor = "ClusterRole <nil>/winready-editor"
	keeps := func(obj map[string]any) bool {
		ann, _ := obj["metadata"].(map[string]any)["annotations"].(map[string]any)
		return ann["helm.sh/resource-policy"] == "keep"
	}
	aggregated := func(obj map[string]any) bool {
		labels, _ := obj["metadata"].(map[string]any)["labels"].(map[string]any)
		return labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
	}

	objs := byKey(t, renderChart(t, c, nil))
	for _, k := range []string{crd, "Namespace <nil>/winready-system", "Namespace <nil>/winready-probe"} {
		if objs[k] == nil || !keeps(objs[k]) {
			t.Errorf("by default, %s is not kept on helm uninstall: %s", k, asJSON(objs[k]))
		}
	}
	if objs[editor] == nil || aggregated(objs[editor]) {
		t.Errorf("by default, winready-editor is aggregated into edit: %s", asJSON(objs[editor]))
	}

	objs = byKey(t, renderChart(t, c, map[string]any{"crds": map[string]any{"keep": false}, "rbac": map[string]any{"aggregateToEdit": true}}))
	if objs[crd] == nil || keeps(objs[crd]) {
		t.Errorf("crds.keep false: %s", asJSON(objs[crd]))
	}
	if !aggregated(objs[editor]) {
		t.Errorf("rbac.aggregateToEdit true: %s", asJSON(objs[editor]))
	}
	objs = byKey(t, renderChart(t, c, map[string]any{"crds": map[string]any{"enabled": false}}))
	if objs[crd] != nil {
		t.Error("crds.enabled false renders the CRD")
	}
	if len(objs) < 10 {
		t.Errorf("crds.enabled false renders %d objects", len(objs))
	}
}
