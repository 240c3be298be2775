package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// pacedPrefix names the nodes whose pods kwok makes Ready podReadyDelay
// after they are bound, as a kubelet starting a container would; pods on
// every other node are Ready at once, as before.
const (
	pacedPrefix   = "paced-"
	podReadyDelay = time.Second
)

// kwokStages writes into dir the stages kwok runs with: its own, as
// hack/e2e-binaries.sh copied them into bin/e2e/kwok-stages, with pod-ready
// split in two by the node's name: the paced nodes' pods become Ready after
// podReadyDelay, the others' at once. The two selectors are disjoint, so
// kwok never picks between them.
func kwokStages(dir string) ([]string, error) {
	src, err := filepath.Glob(binPath("e2e", "kwok-stages", "*.yaml"))
	if err != nil || len(src) == 0 {
		return nil, fmt.Errorf("no kwok stages in bin/e2e/kwok-stages (run make e2e-binaries): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var stages []string
	write := func(name string, stage map[string]any) error {
		data, err := yaml.Marshal(stage)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		stages = append(stages, path)
		return os.WriteFile(path, data, 0o600)
	}
	for _, path := range src {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		stage := map[string]any{}
		if err := yaml.Unmarshal(data, &stage); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if filepath.Base(path) != "pod-ready.yaml" {
			if err := write(filepath.Base(path), stage); err != nil {
				return nil, err
			}
			continue
		}
		paced, err := splitByPace(stage)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := write("pod-ready.yaml", stage); err != nil {
			return nil, err
		}
		if err := write("pod-ready-paced.yaml", paced); err != nil {
			return nil, err
		}
	}
	return stages, nil
}

// splitByPace narrows stage to pods on nodes that are not paced and returns
// its copy for the paced ones, delayed.
func splitByPace(stage map[string]any) (map[string]any, error) {
	data, err := yaml.Marshal(stage)
	if err != nil {
		return nil, err
	}
	paced := map[string]any{}
	if err := yaml.Unmarshal(data, &paced); err != nil {
		return nil, err
	}
	onPaced := func(s map[string]any, op string) error {
		spec, _ := s["spec"].(map[string]any)
		sel, _ := spec["selector"].(map[string]any)
		exprs, ok := sel["matchExpressions"].([]any)
		if !ok {
			return fmt.Errorf("pod-ready has no selector.matchExpressions")
		}
		sel["matchExpressions"] = append(exprs, map[string]any{
			// A jq query on the pod, as kwok's selectors are.
			"key":      fmt.Sprintf(`(.spec.nodeName // "") | startswith(%q)`, pacedPrefix),
			"operator": op, "values": []any{"true"},
		})
		return nil
	}
	if err := onPaced(stage, "NotIn"); err != nil {
		return nil, err
	}
	if err := onPaced(paced, "In"); err != nil {
		return nil, err
	}
	paced["metadata"] = map[string]any{"name": "pod-ready-paced"}
	paced["spec"].(map[string]any)["delay"] = map[string]any{"durationMilliseconds": podReadyDelay.Milliseconds()}
	return paced, nil
}
