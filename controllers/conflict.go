package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// maxReverts is how often winready puts a value back after another field
// manager reverted it, before it stops fighting and asks a person.
const maxReverts = 2

// reverted handles a value that another manager put back after this step
// changed it. It re-applies a bounded number of times, then stalls naming
// the manager and the YAML to commit to its source. It returns true when
// it stalled.
func (p *pass) reverted(ctx context.Context, s *phase.Scope, step phase.Step, dir v1alpha1.Direction) (bool, error) {
	rec := p.step(step.Name())
	rec.Reverts++
	changes, err := step.Plan(ctx, s, dir)
	if err != nil {
		return false, err
	}
	manager, err := p.lastManagerOf(ctx, changes)
	if err != nil {
		return false, err
	}
	who := "another field manager"
	if manager != "" {
		who = fmt.Sprintf("field manager %q", manager)
	}
	if rec.Reverts <= maxReverts {
		p.event(corev1.EventTypeWarning, "ValueReverted", string(step.Name()), "%s put back the value of %s; applying it again (%d of %d)",
			who, step.Name(), rec.Reverts, maxReverts)
		return false, nil
	}
	msg := fmt.Sprintf("%s keeps putting back what step %s changes (%d times); winready stops here instead of fighting it. "+
		"Commit this to the source of that manager (e.g. the Installation in Git); winready goes on by itself once the value stays:\n%s",
		who, step.Name(), rec.Reverts, planYAML(changes))
	p.stall(conditions.ReasonConflictingManager, msg)
	if !p.alreadyStalled(conditions.ReasonConflictingManager) {
		p.event(corev1.EventTypeWarning, conditions.ReasonConflictingManager, string(step.Name()), "%s", msg)
	}
	return true, nil
}

// lastManagerOf finds, in the Installation's managedFields (read past the
// cache, which drops them), the manager other than winready that last wrote
// the fields of the changes.
func (p *pass) lastManagerOf(ctx context.Context, changes []v1alpha1.PlannedChange) (string, error) {
	inst, err := calico.GetInstallation(ctx, p.r.APIReader)
	if err != nil || inst == nil {
		return "", err
	}
	var best *metav1.ManagedFieldsEntry
	for i := range inst.ManagedFields {
		e := &inst.ManagedFields[i]
		if e.Manager == FieldOwner || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
			continue
		}
		for _, c := range changes {
			if c.Object == "Installation default" && owns(fields, c.Field) &&
				(best == nil || best.Time == nil || (e.Time != nil && e.Time.After(best.Time.Time))) {
				best = e
			}
		}
	}
	if best == nil {
		return "", nil
	}
	return best.Manager, nil
}

// owns reports whether a managedFields set holds the field path, e.g.
// spec.calicoNetwork.bgp; for a pool's field it is enough to hold the pools.
func owns(fields map[string]any, path string) bool {
	path, _, _ = strings.Cut(path, "[")
	node := fields
	for _, part := range strings.Split(path, ".") {
		next, ok := node["f:"+part].(map[string]any)
		if !ok {
			return false
		}
		node = next
	}
	return true
}

// planYAML renders planned Installation changes as the YAML to commit.
func planYAML(changes []v1alpha1.PlannedChange) string {
	var b strings.Builder
	b.WriteString("spec:\n")
	var pools []string
	for _, c := range changes {
		if c.Object != "Installation default" || c.After == phase.Absent {
			continue
		}
		switch {
		case strings.HasPrefix(c.Field, "spec.calicoNetwork.ipPools[name="):
			name := strings.TrimSuffix(strings.TrimPrefix(c.Field, "spec.calicoNetwork.ipPools[name="), "].encapsulation")
			pools = append(pools, fmt.Sprintf("    - name: %s\n      encapsulation: %s\n", name, c.After))
		case strings.HasPrefix(c.Field, "spec.calicoNetwork."):
			fmt.Fprintf(&b, "  calicoNetwork:\n    %s: %s\n", strings.TrimPrefix(c.Field, "spec.calicoNetwork."), c.After)
		case c.Field == "spec.serviceCIDRs":
			list := strings.Split(strings.Trim(c.After, "[]"), ", ")
			b.WriteString("  serviceCIDRs:\n")
			for _, cidr := range list {
				fmt.Fprintf(&b, "  - %s\n", cidr)
			}
		}
	}
	if len(pools) > 0 {
		slices.Sort(pools)
		b.WriteString("  calicoNetwork:\n    ipPools:\n" + strings.Join(pools, ""))
	}
	return b.String()
}
