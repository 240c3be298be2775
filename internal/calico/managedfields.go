package calico

import (
	"encoding/json"
	"strconv"

	operatorv1 "github.com/tigera/operator/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// LastManager finds, in the Installation's managedFields, the field manager
// other than self that last wrote a field of the changes: the one putting
// back what winready changed. "" when none is found.
func LastManager(inst *operatorv1.Installation, changes []Change, self string) string {
	var best *metav1.ManagedFieldsEntry
	for i := range inst.ManagedFields {
		e := &inst.ManagedFields[i]
		if e.Manager == self || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		for _, c := range changes {
			if c.Object == ObjectInstallation && Owns(fields, c.Pointer) &&
				(best == nil || best.Time == nil || (e.Time != nil && e.Time.After(best.Time.Time))) {
				best = e
			}
		}
	}
	if best == nil {
		return ""
	}
	return best.Manager
}

// Owns reports whether a managedFields set (FieldsV1) holds the field at a
// JSON pointer. Lists of pools are keyed by name in managedFields, not by
// index: holding the list is enough for a field of one of its items.
func Owns(fields map[string]any, pointer string) bool {
	node := fields
	for _, part := range Segments(pointer) {
		if _, err := strconv.Atoi(part); err == nil {
			return true
		}
		next, ok := node["f:"+part].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}

// CommitYAML renders the Installation changes as the YAML a person commits to
// the source of the Installation (e.g. Git), so that another field manager
// stops putting back the old values. Removed fields are left out: they are
// removed from the source.
func CommitYAML(changes []Change) string {
	root := map[string]any{}
	for _, c := range changes {
		if c.Object != ObjectInstallation || !c.New.Present || c.Pointer == "" {
			continue
		}
		put(root, Segments(c.Pointer), c)
	}
	out, err := yaml.Marshal(root)
	if err != nil {
		return err.Error()
	}
	return string(out)
}

// put sets the change's value in the tree at the pointer's segments; a list
// index becomes an item named after the pool it designates.
func put(node map[string]any, parts []string, c Change) {
	key := parts[0]
	if len(parts) == 1 {
		node[key] = c.New.V
		return
	}
	if _, err := strconv.Atoi(parts[1]); err == nil && c.Pool != nil {
		item := map[string]any{"name": c.Pool.Name}
		items, _ := node[key].([]any)
		for _, it := range items {
			if m := it.(map[string]any); m["name"] == c.Pool.Name {
				item = m
			}
		}
		if len(item) == 1 {
			node[key] = append(items, item)
		}
		put(item, parts[2:], c)
		return
	}
	child, ok := node[key].(map[string]any)
	if !ok {
		child = map[string]any{}
		node[key] = child
	}
	put(child, parts[1:], c)
}

// OwnedBy reports whether manager's managedFields own the Installation field
// at pointer: the value there is the last one manager wrote, as a field
// another manager changes since passes to that manager.
func OwnedBy(inst *operatorv1.Installation, pointer, manager string) bool {
	for _, e := range inst.ManagedFields {
		if e.Manager != manager || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) == nil && Owns(fields, pointer) {
			return true
		}
	}
	return false
}
