// Package phase knows what each step of the migration changes. Each step
// reads what it decides from once per reconcile, and one pure function, Diff,
// turns what it read, the originals, the targets and the direction into a
// typed list of changes. Everything else is a rendering of that list: the
// cluster holds the target when it is empty, the plan shows it, internal/calico
// writes it as guarded patches, and the conflict check and the YAML to commit
// walk its pointers. The same steps run forward to migrate and backward to
// roll back; the cluster is always looked at first, so a step never trusts a
// stored phase alone.
package phase

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// Readers are where the steps read from.
type Readers struct {
	// Cache reads objects the manager caches.
	Cache client.Reader
	// API reads directly from the API server the objects winready does not
	// cache (IPAM configuration, IP pools).
	API client.Reader
}

// Targets are the detected or overridden values the migration writes.
type Targets struct {
	ServiceCIDRs []string
	Host         string
	Port         string
}

// Input is everything a step's decision depends on.
type Input struct {
	// Cluster is the cluster as read in this reconcile.
	Cluster *calico.Cluster
	// Originals are the values recorded before the first change.
	Originals *v1alpha1.Originals
	// Targets are the values the forward path writes.
	Targets Targets
	// Direction is Migrate or Rollback.
	Direction v1alpha1.Direction
}

func (in Input) rollback() bool { return in.Direction == v1alpha1.DirectionRollback }

// Step is one step of the migration.
type Step interface {
	Name() v1alpha1.StepName
	// Read reads into c what the step decides from.
	Read(ctx context.Context, r Readers, c *calico.Cluster) error
	// Record writes into o the values this step will change.
	Record(c *calico.Cluster, o *v1alpha1.Originals)
	// Diff lists every change that takes the cluster to the step's target
	// for the direction: the Windows-ready value when migrating, the
	// original when rolling back. The cluster holds the target when there
	// is none.
	Diff(in Input) []calico.Change
	// Settled says, once the cluster holds the target, whether Calico has
	// applied it everywhere, and what it waits for if not.
	Settled(in Input) (bool, string)
}

// Gated is a step whose changes wait until the cluster is ready for them.
type Gated interface {
	// ReadGate reads into c what ReadyToChange decides from, beyond what
	// Read read; it is called only when the step's changes are due.
	ReadGate(ctx context.Context, r Readers, c *calico.Cluster) error
	// ReadyToChange says whether the changes may be made now, and what they
	// wait for if not.
	ReadyToChange(in Input) (bool, string)
}

// Plan renders the changes of a step as the status shows them.
func Plan(step v1alpha1.StepName, changes []calico.Change) []v1alpha1.PlannedChange {
	out := make([]v1alpha1.PlannedChange, 0, len(changes))
	for _, c := range changes {
		out = append(out, v1alpha1.PlannedChange{Step: step, Object: string(c.Object), Field: c.Field(),
			Before: c.Before(), After: c.After()})
	}
	return out
}

// readHealth reads the named TigeraStatuses into c, those c does not hold
// yet: a pass reads each once, whichever step asks first.
func readHealth(ctx context.Context, r Readers, c *calico.Cluster, names ...string) error {
	if c.Health == nil {
		c.Health = map[string]calico.Health{}
	}
	for _, name := range names {
		if _, ok := c.Health[name]; ok {
			continue
		}
		h, err := calico.ReadHealth(ctx, r.Cache, name)
		if err != nil {
			return err
		}
		c.Health[name] = h
	}
	return nil
}

// readNode reads the calico-node DaemonSet into c, once a pass.
func readNode(ctx context.Context, r Readers, c *calico.Cluster) (err error) {
	if c.Node != nil {
		return nil
	}
	c.Node, err = calico.ReadDaemonSet(ctx, r.Cache, calico.NodeDaemonSet)
	return err
}

// original records a scalar field, absent included.
func original(v calico.Value) v1alpha1.OriginalValue {
	if !v.Present {
		return v1alpha1.OriginalValue{}
	}
	s, _ := v.V.(string)
	return v1alpha1.OriginalValue{Present: true, Value: s}
}

// value is the field an OriginalValue describes.
func value(o v1alpha1.OriginalValue) calico.Value {
	if !o.Present {
		return calico.Value{}
	}
	return calico.Of(o.Value)
}
