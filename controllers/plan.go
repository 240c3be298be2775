package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
	"github.com/winready/winready/internal/preflight"
)

// ErrNoInstallation means the cluster has no Installation "default".
var ErrNoInstallation = errors.New("no Installation default: winready migrates a Calico cluster installed by the Tigera operator")

// PlanResult is what a migration would do to the cluster as it is now.
type PlanResult struct {
	// Checks are the compatibility checks of the preflight, without the UDP
	// 4789 probe.
	Checks []v1alpha1.PreflightCheck `json:"checks"`
	// Passed is false when a check failed; there is no plan then.
	Passed bool `json:"passed"`
	// Targets are the values the migration would write and their sources.
	Targets *v1alpha1.Targets `json:"targets,omitempty"`
	// Plan is every change the migration would make, in order.
	Plan []v1alpha1.PlannedChange `json:"plan"`
	// Canary is the canary calico-node's rollout would begin with, when
	// there is one (spec.rollout.canary).
	Canary *v1alpha1.CanaryStatus `json:"canary,omitempty"`
}

// PlanCluster runs the preflight checks and the dry run of the operator for
// wr against the cluster c reads, and changes nothing: c only needs to get
// and list. The status of wr is ignored and left alone.
func PlanCluster(ctx context.Context, c client.Client, d preflight.Discovery, wr *v1alpha1.WindowsReadiness) (PlanResult, error) {
	inst, err := calico.GetInstallation(ctx, c)
	if err != nil {
		return PlanResult{}, err
	}
	if inst == nil {
		return PlanResult{}, ErrNoInstallation
	}
	// No operator namespace here: the cluster CA that proves the API server
	// address (ConfigMap kube-root-ca.crt, published in every namespace) is
	// read from default.
	r := &Reconciler{Client: c, APIReader: c, Discovery: d, Clock: clock.RealClock{},
		opts: Options{Namespace: corev1.NamespaceDefault}.withDefaults()}
	cp := wr.DeepCopy()
	cp.Status = v1alpha1.WindowsReadinessStatus{}
	cp.Spec.DryRun = true
	s := &scope{wr: cp, before: cp.DeepCopy(), now: r.Clock.Now(), inst: inst}

	o := preflightChecks{r}.reconcile(ctx, s)
	if o.Err != nil {
		return PlanResult{}, fmt.Errorf("preflight: %w", o.Err)
	}
	res := PlanResult{Checks: s.wr.Status.Preflight.Checks, Passed: o.Done()}
	if !res.Passed {
		return res, nil
	}
	o = sequence(ctx, s, targets{r}, dryRun{r, v1alpha1.DirectionMigrate, phase.Steps()})
	switch {
	case o.Err != nil:
		return res, o.Err
	case o.Reason != conditions.ReasonDryRun:
		// A value could not be detected, or the address failed its proof.
		return res, errors.New(o.Message)
	}
	res.Targets, res.Plan, res.Canary = s.wr.Status.Targets, s.wr.Status.Plan, s.wr.Status.Canary
	return res, nil
}
