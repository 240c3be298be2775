package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	winreadyversion "github.com/winready/winready/internal/version"
)

// The Helm chart is generated from the same kustomize build as install.yaml,
// so that the two cannot drift: every object of config/default becomes a
// template (the CRD too, in templates/crds.yaml, so that helm upgrade
// upgrades it, kept on uninstall by crds.keep), and the fields a platform
// team sets are cut out of the manager's Deployment and replaced by values
// whose defaults are what config/default holds. test/chart renders the chart with the Helm SDK and compares it with
// install.yaml.

// A hole is a field of a rendered object replaced by a template: the
// generator writes its marker as the field's value (or, to add to a map
// that has entries, as a key), and fillHoles turns the marker's line into
// Helm template text.
type hole int

const (
	// scalar: `key: <expr>`.
	scalar hole = iota
	// block: the key and the value's YAML, only when the value is set.
	block
	// merge: the value's entries, added to the map the marker is in.
	merge
	// items: the value's items, added to the list the marker is the last
	// item of.
	items
	// entry: the hole's line, added to the map the marker is in when the
	// value is true.
	entry
)

var holes = map[string]struct {
	kind hole
	expr string
	line string
}{
	"IMAGE":             {kind: scalar, expr: `include "winready.image" . | quote`},
	"PULLSECRETS":       {kind: block, expr: `.Values.imagePullSecrets`},
	"PODLABELS":         {kind: merge, expr: `.Values.podLabels`},
	"PODANNOTATIONS":    {kind: block, expr: `.Values.podAnnotations`},
	"EXTRAARGS":         {kind: items, expr: `.Values.extraArgs`},
	"EXTRAENV":          {kind: items, expr: `.Values.extraEnv`},
	"CRDKEEP":           {kind: entry, expr: `.Values.crds.keep`, line: `helm.sh/resource-policy: keep`},
	"AGGREGATETOEDIT":   {kind: entry, expr: `.Values.rbac.aggregateToEdit`, line: `rbac.authorization.k8s.io/aggregate-to-edit: "true"`},
	"REPLICAS":          {kind: scalar, expr: `.Values.replicas`},
	"RESOURCES":         {kind: block, expr: `.Values.resources`},
	"NODESELECTOR":      {kind: block, expr: `.Values.nodeSelector`},
	"TOLERATIONS":       {kind: block, expr: `.Values.tolerations`},
	"PRIORITYCLASSNAME": {kind: block, expr: `.Values.priorityClassName`},
	"ANNOTATIONS":       {kind: block, expr: `.Values.commonAnnotations`},
	"MERGEANNOTATIONS":  {kind: merge, expr: `.Values.commonAnnotations`},
	"SMLABELS":          {kind: merge, expr: `.Values.serviceMonitor.labels`},
	"RULELABELS":        {kind: merge, expr: `.Values.prometheusRule.labels`},
}

func marker(name string) string { return "@@" + name + "@@" }

var (
	holeLine = regexp.MustCompile(`^( *)(- )?(?:([^:'"]+): '?@@([A-Z]+)@@'?|'?@@([A-Z]+)@@'?: "")$`)
	itemLine = regexp.MustCompile(`^( *)- '?@@([A-Z]+)@@'?$`)
)

// fillHoles turns each marker line of a marshalled object into template text.
func fillHoles(doc string) (string, error) {
	var out []string
	for line := range strings.Lines(doc) {
		line = strings.TrimSuffix(line, "\n")
		if m := itemLine.FindStringSubmatch(line); m != nil {
			h, ok := holes[m[2]]
			if !ok || h.kind != items {
				return "", fmt.Errorf("hole %s in a list item: %q", m[2], line)
			}
			out = append(out, fmt.Sprintf("{{- with %s }}", h.expr), fmt.Sprintf("{{- toYaml . | nindent %d }}", len(m[1])), "{{- end }}")
			continue
		}
		m := holeLine.FindStringSubmatch(line)
		if m == nil {
			out = append(out, line)
			continue
		}
		indent, key, name := m[1], m[3], m[4]
		if m[2] != "" {
			return "", fmt.Errorf("a hole in a list item: %q", line)
		}
		if name == "" {
			name = m[5]
		}
		h, ok := holes[name]
		if !ok {
			return "", fmt.Errorf("unknown hole %s", name)
		}
		switch {
		case h.kind == scalar && key != "":
			out = append(out, fmt.Sprintf("%s%s: {{ %s }}", indent, key, h.expr))
		case h.kind == block && key != "" && name == "PRIORITYCLASSNAME":
			out = append(out, fmt.Sprintf("{{- with %s }}", h.expr), fmt.Sprintf("%s%s: {{ . | quote }}", indent, key), "{{- end }}")
		case h.kind == block && key != "":
			out = append(out, fmt.Sprintf("{{- with %s }}", h.expr), fmt.Sprintf("%s%s:", indent, key),
				fmt.Sprintf("{{- toYaml . | nindent %d }}", len(indent)+2), "{{- end }}")
		case h.kind == entry && key == "":
			out = append(out, fmt.Sprintf("{{- if %s }}", h.expr), indent+h.line, "{{- end }}")
		case h.kind == merge && key == "":
			out = append(out, fmt.Sprintf("{{- with %s }}", h.expr), fmt.Sprintf("{{- toYaml . | nindent %d }}", len(indent)), "{{- end }}")
		default:
			return "", fmt.Errorf("hole %s in the wrong place: %q", name, line)
		}
	}
	return strings.Join(out, "\n") + "\n", nil
}

// escapeTemplates keeps text that looks like a Go template (the alerts'
// {{ $labels.reason }}) as it is through Helm's rendering.
func escapeTemplates(s string) string {
	return regexp.MustCompile(`\{\{|\}\}`).ReplaceAllStringFunc(s, func(m string) string {
		return `{{ "` + m + `" }}`
	})
}

var semverTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// chartVersion is the chart's SemVer 2 version: the release's without its v;
// a build that is not of a tag gets a pre-release of 0.0.0.
func chartVersion(version string) string {
	if semverTag.MatchString(version) {
		return strings.TrimPrefix(version, "v")
	}
	clean := regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(version, "-")
	return "0.0.0-" + strings.Trim(clean, "-")
}

// splitDocs decodes a multi-document YAML stream into objects.
func splitDocs(stream []byte) ([]map[string]any, error) {
	var objs []map[string]any
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(stream), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, err
		}
		if len(obj) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

func nested(obj map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, _ := obj[p].(map[string]any)
		if next == nil {
			next = map[string]any{}
			obj[p] = next
		}
		obj = next
	}
	return obj
}

// chartValues are the chart's defaults, taken from the rendered Deployment.
type chartValues struct {
	// registry and repository are the release's image, split at the
	// registry's host, so that a mirror changes only the registry.
	registry, repository, digest string
	replicas                     any
	resources                    any
	nodeSelector                 any
	tolerations                  any
	priorityClassName            any
}

// templateDeployment cuts the values' holes into the manager's Deployment.
func templateDeployment(obj map[string]any, v *chartValues) error {
	spec := nested(obj, "spec")
	v.replicas = spec["replicas"]
	spec["replicas"] = marker("REPLICAS")
	podMeta := nested(spec, "template", "metadata")
	labels, _ := podMeta["labels"].(map[string]any)
	if len(labels) == 0 {
		return fmt.Errorf("the Deployment winready-manager's pods have no labels")
	}
	labels[marker("PODLABELS")] = ""
	if podMeta["annotations"] != nil {
		return fmt.Errorf("the Deployment winready-manager's pods have annotations, which podAnnotations would replace")
	}
	podMeta["annotations"] = marker("PODANNOTATIONS")
	pod := nested(spec, "template", "spec")
	if pod["imagePullSecrets"] != nil {
		return fmt.Errorf("the Deployment winready-manager has imagePullSecrets, which the value would replace")
	}
	pod["imagePullSecrets"] = marker("PULLSECRETS")
	v.nodeSelector, v.tolerations, v.priorityClassName = pod["nodeSelector"], pod["tolerations"], pod["priorityClassName"]
	pod["nodeSelector"], pod["tolerations"], pod["priorityClassName"] = marker("NODESELECTOR"), marker("TOLERATIONS"), marker("PRIORITYCLASSNAME")
	containers, _ := pod["containers"].([]any)
	found := 0
	for _, c := range containers {
		c, _ := c.(map[string]any)
		if c["name"] != "manager" {
			continue
		}
		found++
		v.resources = c["resources"]
		c["resources"] = marker("RESOURCES")
		c["image"] = marker("IMAGE")
		args, _ := c["args"].([]any)
		c["args"] = append(args, marker("EXTRAARGS"))
		env, _ := c["env"].([]any)
		c["env"] = append(env, marker("EXTRAENV"))
		for _, e := range env {
			if e, _ := e.(map[string]any); e["name"] == "WINREADY_IMAGE" {
				e["value"] = marker("IMAGE")
				found++
			}
		}
	}
	if found != 2 {
		return fmt.Errorf("the Deployment winready-manager has no container manager with WINREADY_IMAGE")
	}
	return nil
}

// annotate adds the commonAnnotations hole to an object's metadata.
func annotate(obj map[string]any) {
	meta := nested(obj, "metadata")
	if ann, _ := meta["annotations"].(map[string]any); len(ann) > 0 {
		ann[marker("MERGEANNOTATIONS")] = ""
		return
	}
	meta["annotations"] = marker("ANNOTATIONS")
}

// buildPrometheus builds config/prometheus, as kubectl apply -k would, with
// the alerts' runbook URLs at the release's tag (pinRunbooks).
func buildPrometheus(configDir, version string) ([]byte, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(configDir, "prometheus"))
	if err != nil {
		return nil, fmt.Errorf("building config/prometheus: %w", err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	return pinRunbooks(out, version), nil
}

// runbookBranch is where config/prometheus's runbook URLs point: the
// troubleshooting guide as it is on the main branch.
const runbookBranch = "https://github.com/winready/winready/blob/main/"

// pinRunbooks points the runbook URLs at the release's tag, so that an alert
// fired by a release opens the guide written for it, not today's. A build
// that is no release (a version that is not vX.Y.Z) keeps the main branch.
func pinRunbooks(rules []byte, version string) []byte {
	if !semver.IsValid(version) {
		return rules
	}
	return bytes.ReplaceAll(rules, []byte(runbookBranch), []byte(strings.Replace(runbookBranch, "/blob/main/", "/blob/"+version+"/", 1)))
}

// writeChart writes the chart of install (config/default as rendered for
// the release) and config/prometheus into dir/winready.
func writeChart(configDir, dir, version string, install []byte, repository, digest string) error {
	root := filepath.Join(dir, "winready")
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	files := map[string][]byte{}
	v := chartValues{digest: digest}
	v.registry, v.repository, _ = strings.Cut(repository, "/")
	if v.repository == "" {
		v.registry, v.repository = "", repository
	}
	if err := installTemplates(install, files, &v); err != nil {
		return err
	}
	if err := prometheusTemplates(configDir, version, files); err != nil {
		return err
	}
	files["templates/_helpers.tpl"] = []byte(`{{/* The manager's image, which is also WINREADY_IMAGE: the probe agents' image, which the
admission policy winready-probe-daemonset admits only when it is the manager's. */}}
{{- define "winready.image" -}}
{{ with .Values.image.registry }}{{ . }}/{{ end }}{{ required "image.repository is required" .Values.image.repository }}@{{ required "image.digest is required: winready's image is pinned by digest" .Values.image.digest }}
{{- end -}}
`)
	files["values.schema.json"] = valuesSchema
	values, err := valuesFile(v)
	if err != nil {
		return err
	}
	files["values.yaml"] = values
	files["Chart.yaml"] = chartFile(version)
	return writeFiles(root, files)
}

// chartOnly marks what the chart adds to install.yaml's objects: Helm's keep
// policy where an uninstall must not delete, and the values that change
// metadata.
func chartOnly(kind, name string, meta map[string]any) error {
	annotations := func() map[string]any {
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
			meta["annotations"] = ann
		}
		return ann
	}
	switch {
	case kind == "CustomResourceDefinition":
		// A template, not crds/: helm upgrade upgrades it (Helm never
		// touches crds/ after the install), and crds.keep keeps it, and
		// with it every WindowsReadiness, on helm uninstall.
		annotations()[marker("CRDKEEP")] = ""
	case kind == "Namespace":
		// helm uninstall keeps the namespace, and with it the record of the
		// originals a rollback needs (ConfigMap winready-originals, which no
		// chart renders).
		annotations()["helm.sh/resource-policy"] = "keep"
	case kind == "ClusterRole" && name == "winready-editor":
		labels, _ := meta["labels"].(map[string]any)
		if len(labels) == 0 {
			return fmt.Errorf("ClusterRole winready-editor has no labels")
		}
		labels[marker("AGGREGATETOEDIT")] = ""
	}
	return nil
}

// installTemplates puts install.yaml's CRDs into crds/ and every other
// object into templates/winready.yaml, with the Deployment's values taken out.
func installTemplates(install []byte, files map[string][]byte, v *chartValues) error {
	objs, err := splitDocs(install)
	if err != nil {
		return fmt.Errorf("reading install.yaml: %w", err)
	}
	var templates, crds []string
	seenDeployment := false
	for _, obj := range objs {
		meta := nested(obj, "metadata")
		kind, name := obj["kind"].(string), meta["name"].(string)
		if err := chartOnly(kind, name, meta); err != nil {
			return err
		}
		if kind == "CustomResourceDefinition" {
			doc, err := templateOf(obj)
			if err != nil {
				return fmt.Errorf("CRD %s: %w", name, err)
			}
			crds = append(crds, doc)
			continue
		}
		if kind == "Deployment" && name == "winready-manager" {
			if err := templateDeployment(obj, v); err != nil {
				return err
			}
			seenDeployment = true
		}
		doc, err := templateOf(obj)
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, name, err)
		}
		templates = append(templates, doc)
	}
	if !seenDeployment {
		return fmt.Errorf("install.yaml has no Deployment winready-manager")
	}
	files["templates/winready.yaml"] = []byte("# Generated by hack/release from config/default: edit config/, not this file.\n---\n" +
		strings.Join(templates, "---\n"))
	files["templates/crds.yaml"] = []byte("# Generated by hack/release from config/crd: edit the API types, not this file.\n" +
		"{{- if .Values.crds.enabled }}\n---\n" + strings.Join(crds, "---\n") + "{{- end }}\n")
	return nil
}

// prometheusTemplates puts config/prometheus into templates of its own: the
// ServiceMonitor, with the identity it scrapes with (a ServiceAccount, its
// token Secret and its binding to winready-metrics-reader), rendered when
// serviceMonitor is enabled, and the PrometheusRule when prometheusRule is.
// Only the ServiceMonitor and the PrometheusRule take the extra labels: they
// are what a Prometheus selects.
func prometheusTemplates(configDir, version string, files map[string][]byte) error {
	prom, err := buildPrometheus(configDir, version)
	if err != nil {
		return err
	}
	pobjs, err := splitDocs(prom)
	if err != nil {
		return err
	}
	const (
		smFile   = "templates/servicemonitor.yaml"
		ruleFile = "templates/prometheusrule.yaml"
	)
	docs := map[string][]string{}
	for _, obj := range pobjs {
		kind := obj["kind"].(string)
		var file, labels string
		switch kind {
		case "ServiceMonitor":
			file, labels = smFile, "SMLABELS"
		case "ServiceAccount", "Secret", "ClusterRoleBinding":
			file = smFile
		case "PrometheusRule":
			file, labels = ruleFile, "RULELABELS"
		default:
			return fmt.Errorf("config/prometheus holds a %s, which the chart has no value for", kind)
		}
		if labels != "" {
			nested(obj, "metadata", "labels")[marker(labels)] = ""
		}
		doc, err := templateOf(obj)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		docs[file] = append(docs[file], doc)
	}
	for file, cond := range map[string]string{smFile: ".Values.serviceMonitor.enabled", ruleFile: ".Values.prometheusRule.enabled"} {
		if len(docs[file]) == 0 {
			return fmt.Errorf("config/prometheus gives nothing for %s", file)
		}
		files[file] = []byte("# Generated by hack/release from config/prometheus.\n{{- if " + cond + " }}\n---\n" +
			strings.Join(docs[file], "---\n") + "{{- end }}\n")
	}
	return nil
}

// templateOf is obj as a template: the common annotations added, Helm's own
// braces in its text escaped, and the values' holes filled.
func templateOf(obj map[string]any) (string, error) {
	annotate(obj)
	data, err := yaml.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encoding: %w", err)
	}
	return fillHoles(escapeTemplates(string(data)))
}

// chartFile is Chart.yaml for version.
func chartFile(version string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v2
name: winready
description: Migrates a Calico cluster to the VXLAN mode Windows nodes need, step by step, with rollback.
type: application
version: %s
appVersion: %q
kubeVersion: ">=%s.0-0"
home: %s
sources:
- %s
annotations:
  licenses: Apache-2.0
`, chartVersion(version), version, winreadyversion.MinKubernetes, source, source))
}

// writeFiles writes files under root.
func writeFiles(root string, files map[string][]byte) error {
	for name, data := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("writing the chart: %w", err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("writing the chart: %w", err)
		}
	}
	return nil
}

func yamlBlock(v any, indent int) (string, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	pad := strings.Repeat(" ", indent)
	var lines []string
	for line := range strings.Lines(string(data)) {
		lines = append(lines, pad+strings.TrimSuffix(line, "\n"))
	}
	return strings.Join(lines, "\n"), nil
}

// valuesFile writes values.yaml: the defaults are config/default's.
// valuesHead and valuesTail are values.yaml around the values read from
// config/default (valuesFile).
const valuesHead = `# Defaults: the objects of the release's install.yaml (test/chart checks it).

# The manager's image, which is also the probe agents' (WINREADY_IMAGE):
# registry/repository@digest. A mirror sets the registry (and the repository
# if its path differs); the digest stays the release's.
image:
  registry: %s
  repository: %s
  digest: %s

# Secrets the manager's pods pull the image with, e.g. [{name: mirror-creds}].
# The UDP probe's agents, which the manager runs in winready-probe, pull with
# the nodes' credentials.
imagePullSecrets: []

# Added to the manager pods' labels (the selector's labels stay).
podLabels: {}

# The manager pods' annotations.
podAnnotations: {}

# Added after the manager's arguments, e.g. [--zap-log-level=debug].
extraArgs: []

# Added to the manager container's environment, e.g. [{name: HTTPS_PROXY, value: ...}].
extraEnv: []

# Two replicas with leader election: one changes the cluster, the other takes
# over within the lease duration.
replicas: %v

`

const valuesTail = `# The manager pods' PriorityClass.
priorityClassName: %q

# The CRD is a template: helm upgrade upgrades it. keep leaves it, and every
# WindowsReadiness, in the cluster on helm uninstall (delete it by hand once
# no migration needs its record). enabled: false leaves the CRD to another
# tool, which then installs it before the chart.
crds:
  enabled: true
  keep: true

# ClusterRole winready-editor (approve a step, pause, resume) is bound by
# name; aggregateToEdit adds it to the built-in edit ClusterRole, so that
# every namespace editor of the cluster gets it. Rollbacks and
# acknowledgements stay winready-admin's either way.
rbac:
  aggregateToEdit: false

# Added to every object the chart renders (not the CRD in crds/, which Helm
# does not template), e.g. argocd.argoproj.io/sync-wave: "-1".
commonAnnotations: {}

# config/prometheus's ServiceMonitor (needs the Prometheus operator's CRDs) and the ServiceAccount, token
# Secret and ClusterRoleBinding it scrapes with. kube-prometheus-stack selects ServiceMonitors by its
# release's label: labels: {release: <its Helm release name>} (the labels go on the ServiceMonitor only).
serviceMonitor:
  enabled: false
  labels: {}

# The PrometheusRule of config/prometheus: the alerts and the recording rule.
# kube-prometheus-stack selects rules by the same release label.
prometheusRule:
  enabled: false
  labels: {}
`

func valuesFile(v chartValues) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, valuesHead, v.registry, v.repository, v.digest, v.replicas)
	for _, f := range []struct {
		key, comment string
		val          any
		empty        string
	}{
		{"resources", "The manager container's resources.", v.resources, "{}"},
		{"nodeSelector", "The manager is a Linux binary: keep kubernetes.io/os: linux in any selector.", v.nodeSelector, "{}"},
		{"tolerations", "Tolerations of the manager's pods.", v.tolerations, "[]"},
	} {
		fmt.Fprintf(&b, "# %s\n", f.comment)
		if f.val == nil {
			fmt.Fprintf(&b, "%s: %s\n\n", f.key, f.empty)
			continue
		}
		block, err := yamlBlock(f.val, 2)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s:\n%s\n\n", f.key, block)
	}
	pc := ""
	if s, ok := v.priorityClassName.(string); ok {
		pc = s
	}
	fmt.Fprintf(&b, valuesTail, pc)
	return b.Bytes(), nil
}

// packageChart writes dir/winready as out/winready-<chart version>.tgz, the
// layout `helm package` writes, with fixed owners and times.
func packageChart(dir, out string, mtime time.Time) (string, error) {
	root := filepath.Join(dir, "winready")
	var names []string
	if err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		names = append(names, filepath.ToSlash(rel))
		return err
	}); err != nil {
		return "", err
	}
	slices.Sort(names)
	chartYAML, err := os.ReadFile(filepath.Join(root, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	var meta struct{ Version string }
	if err := yaml.Unmarshal(chartYAML, &meta); err != nil {
		return "", err
	}
	file := filepath.Join(out, "winready-"+meta.Version+".tgz")
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.ModTime = mtime
	tw := tar.NewWriter(gz)
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return "", err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime,
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return "", err
		}
		if _, err := tw.Write(data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	return file, os.WriteFile(file, buf.Bytes(), 0o644)
}
