// Package phase knows what each step of the migration changes: how to record
// the value it will replace, how to see that the cluster already holds the
// step's target, how to move it there, and what to wait for afterwards. The
// same steps run forward to migrate and backward to roll back; the cluster is
// always looked at first, so a step never trusts a stored phase alone.
package phase

import (
	"context"

	operatorv1 "github.com/tigera/operator/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
)

// Scope is what the steps share within one reconcile.
type Scope struct {
	// Client writes, and reads objects served from the manager's cache.
	Client client.Client
	// Reader reads directly from the API server objects winready does not
	// cache (IPAM configuration, IP pools).
	Reader client.Reader
	// Installation is the Tigera operator's Installation, updated with the
	// server's answer after every patch.
	Installation *operatorv1.Installation
	// Originals are the values recorded before the first change.
	Originals *v1alpha1.Originals
	// Targets are the values the forward path writes.
	Targets Targets
}

// Targets are the detected or overridden values the migration writes.
type Targets struct {
	ServiceCIDRs []string
	Host         string
	Port         string
}

// State is what a step observes of the cluster.
type State struct {
	// Holds is true when the cluster holds the step's target.
	Holds bool
	// Settled is true when Calico has applied it everywhere.
	Settled bool
	// Waiting says what the step waits for while it is not settled.
	Waiting string
}

// Step is one step of the migration.
type Step interface {
	Name() v1alpha1.StepName
	// Record writes into o the values this step will change.
	Record(ctx context.Context, s *Scope, o *v1alpha1.Originals) error
	// Observe looks at the cluster for the target of direction dir: the
	// Windows-ready value when migrating, the original when rolling back.
	Observe(ctx context.Context, s *Scope, dir v1alpha1.Direction) (State, error)
	// Holds is the first half of Observe: whether the cluster holds the
	// target, without asking whether Calico has applied it.
	Holds(ctx context.Context, s *Scope, dir v1alpha1.Direction) (bool, error)
	// Change makes one guarded write toward the target.
	Change(ctx context.Context, s *Scope, dir v1alpha1.Direction) error
	// Plan describes the changes Change would make now.
	Plan(ctx context.Context, s *Scope, dir v1alpha1.Direction) ([]v1alpha1.PlannedChange, error)
}

// Absent stands for a field or object that does not exist, in plans.
const Absent = "<absent>"

// Installation is how plans name the Installation.
const installationObject = "Installation default"

func show(v *string) string {
	if v == nil {
		return Absent
	}
	return *v
}

// fieldChange plans the change of one Installation field.
func fieldChange(step v1alpha1.StepName, field string, current, want *string) []v1alpha1.PlannedChange {
	if sameValue(current, want) {
		return nil
	}
	return []v1alpha1.PlannedChange{{Step: step, Object: installationObject, Field: field, Before: show(current), After: show(want)}}
}

// Steps is the migration in order. The Tigera operator rejects
// windowsDataplane HNS until strict affinity, VXLAN pools, the services
// endpoint and serviceCIDRs are in place, so HNS comes last. A rollback runs
// the list backwards.
func Steps() []Step {
	return []Step{
		StrictAffinity{},
		Encapsulation{},
		BGP{},
		ServicesEndpoint{},
		ServiceCIDRs{},
		WindowsDataplane{},
	}
}

func done() State { return State{Holds: true, Settled: true} }

func waiting(msg string) State { return State{Holds: true, Waiting: msg} }

func notHeld() State { return State{} }
