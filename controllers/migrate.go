package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	operatorv1 "github.com/tigera/operator/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/detect"
	"github.com/winready/winready/internal/phase"
	"github.com/winready/winready/internal/preflight"
	"github.com/winready/winready/internal/record"
)

// migrate moves the cluster forward. Before the first change it runs the
// preflight, resolves the values to write and records the originals in the
// status, so that a crash can never lose them.
func (p *pass) migrate(ctx context.Context, inst *operatorv1.Installation) (ctrl.Result, error) {
	steps := phase.Steps()
	if p.wr.Status.Originals == nil {
		if ok, err := p.preflight(ctx, inst); err != nil || !ok {
			return ctrl.Result{RequeueAfter: p.r.preflightRetry()}, err
		}
		if p.wr.Spec.DryRun {
			// A dry run changes nothing and runs no agents.
			if err := p.stopRounds(ctx); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, p.dryRun(ctx, inst, steps)
		}
		if p.wr.Spec.Paused {
			// No probe round while paused: it would run agents on every node.
			if err := p.stopRounds(ctx); err != nil {
				return ctrl.Result{}, err
			}
			return p.conclude(ctx, phase.BlockedBy(conditions.ReasonPaused,
				"paused before the UDP 4789 probe and the first change; set spec.paused: false to continue").At(steps[0].Name(), 1, len(steps)))
		}
		if ok, result, err := p.probeNetwork(ctx); err != nil || !ok {
			return result, err
		}
		if ok, result, err := p.checkPodNetwork(ctx, BaselineCheck); err != nil || !ok {
			return result, err
		}
		p.preflightPassed()
	}
	p.wr.Status.Plan = nil
	if ok, err := p.resolveTargets(ctx, inst); err != nil || !ok {
		return ctrl.Result{}, err
	}
	in := p.input(inst, v1alpha1.DirectionMigrate)
	if err := p.ensureOriginals(ctx, in.Cluster, steps); err != nil {
		return ctrl.Result{}, err
	}
	in.Originals = p.wr.Status.Originals
	// Set once per pass: flipping it within a pass would move its transition time and rewrite the status.
	if len(p.wr.Status.WindowsNodes) > 0 {
		p.set(conditions.RollbackAllowed, metav1.ConditionFalse, conditions.ReasonWindowsNodesPresent, windowsNodesMessage(p.wr.Status.WindowsNodes))
	} else {
		p.set(conditions.RollbackAllowed, metav1.ConditionTrue, conditions.ReasonNoWindowsNodes, "no Windows node has joined")
	}

	if p.wr.Spec.DryRun {
		if err := p.stopRounds(ctx); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, p.planOnly(ctx, in, steps)
	}
	if step, due := p.podCheckRevertDue(); due {
		return p.revertWorse(ctx, inst, step)
	}
	if o := p.walk(ctx, in, steps, p.migrationBlocked); o.Kind != phase.Done {
		return p.conclude(ctx, o)
	}
	// Once per generation: Ready already True for this one means the event went out.
	if ready := meta.FindStatusCondition(p.wr.Status.Conditions, conditions.Ready); ready == nil ||
		ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != p.wr.Generation {
		p.event(corev1.EventTypeNormal, conditions.ReasonMigrated, "Migrate", "the cluster is ready for Windows nodes")
	}
	p.finish(conditions.ReasonMigrated, "the cluster is ready for Windows nodes")
	// Once Ready, follow each Windows node as it joins.
	return p.watchWindowsNodes(ctx)
}

// migrationBlocked says why the next change may not be made now.
func (p *pass) migrationBlocked(_ context.Context, step v1alpha1.StepName) *phase.Outcome {
	if o := p.heldBySpec(step); o != nil {
		return o
	}
	if o := p.speedRefused(step); o != nil {
		return o
	}
	if reason, why := p.podCheckBlocked(step); reason != "" {
		o := phase.BlockedBy(reason, why)
		return &o
	}
	return p.calicoBlocked(step, v1alpha1.DirectionMigrate)
}

// revertWorse takes back the step after which the pod network got worse,
// as a rollback of that step alone would, then stops with the diagnosis
// (spec.podNetworkCheck.onFailure: Revert).
func (p *pass) revertWorse(ctx context.Context, inst *operatorv1.Installation, name v1alpha1.StepName) (ctrl.Result, error) {
	in := p.input(inst, v1alpha1.DirectionRollback)
	for _, step := range phase.Steps() {
		if step.Name() != name {
			continue
		}
		if o := p.walk(ctx, in, []phase.Step{step}, p.rollbackBlocked); o.Kind != phase.Done {
			return p.conclude(ctx, o)
		}
	}
	p.podCheckReverted(name)
	return ctrl.Result{}, nil
}

// heldBySpec says whether the spec asks to wait before the step's change:
// paused, or a disruptive step awaiting approval.
func (p *pass) heldBySpec(step v1alpha1.StepName) *phase.Outcome {
	if p.wr.Spec.Paused {
		o := phase.BlockedBy(conditions.ReasonPaused, "paused before the next change; set spec.paused: false to continue")
		return &o
	}
	return p.awaitingApproval(step)
}

// input is what the steps decide from, toward dir: the cluster as read from
// the Installation on, the targets and the originals recorded so far.
func (p *pass) input(inst *operatorv1.Installation, dir v1alpha1.Direction) phase.Input {
	return phase.Input{Cluster: &calico.Cluster{Installation: inst}, Originals: p.wr.Status.Originals,
		Targets: targetsOf(p.wr.Status.Targets), Direction: dir}
}

// disruptive are the steps that move traffic: pools change encapsulation,
// calico-node restarts on every node.
var disruptive = map[v1alpha1.StepName]string{
	v1alpha1.StepEncapsulation:    "pod traffic between nodes moves to VXLAN everywhere",
	v1alpha1.StepBGP:              "calico-node restarts on every node and BGP sessions end",
	v1alpha1.StepServicesEndpoint: "calico-node restarts on every node",
}

// awaitingApproval says whether a disruptive step waits for a person.
func (p *pass) awaitingApproval(step v1alpha1.StepName) *phase.Outcome {
	what, ok := disruptive[step]
	if !ok || !p.wr.Spec.RequireApproval || slices.Contains(p.wr.Spec.ApprovedSteps, step) {
		return nil
	}
	o := phase.BlockedBy(conditions.ReasonAwaitingApproval, fmt.Sprintf("waiting for approval (%s): add %s to spec.approvedSteps to go on", what, step))
	return &o
}

// dryRun computes every change the migration would make from the cluster as
// it is, and changes nothing.
func (p *pass) dryRun(ctx context.Context, inst *operatorv1.Installation, steps []phase.Step) error {
	if ok, err := p.resolveTargets(ctx, inst); err != nil || !ok {
		return err
	}
	return p.planOnly(ctx, p.input(inst, v1alpha1.DirectionMigrate), steps)
}

// planOnly writes into status.plan every change the steps would still make
// toward direction dir, from the cluster as it is, and changes nothing: a dry
// run holds at any moment, midway and for a rollback too.
func (p *pass) planOnly(ctx context.Context, in phase.Input, steps []phase.Step) error {
	var plan []v1alpha1.PlannedChange
	for _, step := range steps {
		if err := step.Read(ctx, p.readers(), in.Cluster); err != nil {
			return fmt.Errorf("planning %s: %w", step.Name(), err)
		}
		plan = append(plan, phase.Plan(step.Name(), step.Diff(in))...)
	}
	plan = p.plannedSpeed(in, plan)
	dir := in.Direction
	if len(plan) > maxPlan {
		plan = plan[:maxPlan]
	}
	p.wr.Status.Plan = plan
	what := "the migration"
	if dir == v1alpha1.DirectionRollback {
		what = "the rollback"
	}
	msg := fmt.Sprintf("dry run: %d changes of %s planned in status.plan, none made; set spec.dryRun: false to apply them", len(plan), what)
	if p.wr.Status.Originals == nil {
		msg += "; the UDP 4789 probe runs then"
	}
	p.set(conditions.Stalled, metav1.ConditionFalse, conditions.ReasonDryRun, "")
	p.set(conditions.Reconciling, metav1.ConditionFalse, conditions.ReasonDryRun, msg)
	p.set(conditions.Ready, metav1.ConditionFalse, conditions.ReasonDryRun, msg)
	p.wr.Status.Message = msg
	return nil
}

// maxPlan is the CRD's bound on status.plan.
const maxPlan = 64

// preflight runs the compatibility checks and records them. It returns false
// when a check failed; the migration then stalls before any change.
func (p *pass) preflight(ctx context.Context, inst *operatorv1.Installation) (bool, error) {
	in, err := preflight.Gather(ctx, p.r.APIReader, p.r.Discovery, inst)
	if err != nil {
		return false, err
	}
	if wn := p.wr.Spec.WindowsNodes; wn != nil {
		in.ExpectedWindowsNodes = wn.Expected
	}
	existing, err := calico.GetServicesEndpoint(ctx, p.r.Client)
	if err != nil {
		return false, err
	}
	if in.APIServer, err = preflight.GatherAPIServer(ctx, p.r.APIReader, p.wr.Spec.APIServer, existing); err != nil {
		return false, err
	}
	checks := preflight.Evaluate(in, p.wr.Spec.Preflight)
	now := metav1.NewTime(p.r.Clock.Now())
	var probe *v1alpha1.ProbeStatus
	if prev := p.wr.Status.Preflight; prev != nil {
		probe = prev.Probe
	}
	p.wr.Status.Preflight = &v1alpha1.PreflightStatus{CompletedAt: &now, Checks: checks, Probe: probe}
	if failed := preflight.Failed(checks); len(failed) > 0 {
		msg := "preflight failed, nothing was changed: " + summarize(failed)
		reason := conditions.ReasonPreflightFailed
		if !in.CalicoAPIServed {
			reason = conditions.ReasonCalicoAPIUnavailable
		}
		p.set(conditions.PreflightPassed, metav1.ConditionFalse, reason, msg)
		if !p.alreadyStalled(reason) {
			p.event(corev1.EventTypeWarning, reason, "Preflight", "%s", msg)
		}
		p.stall(reason, msg)
		return false, nil
	}
	p.set(conditions.PreflightPassed, metav1.ConditionUnknown, conditions.ReasonProgressing, "compatibility checks passed; probing UDP 4789")
	return true, nil
}

// preflightPassed records a passed preflight, with its warnings.
func (p *pass) preflightPassed() {
	warned := preflight.Warnings(p.wr.Status.Preflight.Checks)
	if p.wr.Spec.PodNetworkCheck.Disabled {
		warned = append(warned, podCheckPreflight(p.wr.Spec.PodNetworkCheck))
	}
	if probe := p.wr.Status.Preflight.Probe; probe != nil && probe.Skipped {
		warned = append(warned, v1alpha1.PreflightCheck{Name: "NetworkProbe", Result: v1alpha1.CheckWarn,
			Message: "skipped as spec.preflight.skipNetworkProbe asks: UDP 4789 between nodes is not verified"})
	}
	if len(warned) > 0 {
		p.set(conditions.PreflightPassed, metav1.ConditionTrue, conditions.ReasonPreflightWarnings, "passed with warnings: "+summarize(warned))
		return
	}
	p.set(conditions.PreflightPassed, metav1.ConditionTrue, conditions.ReasonPreflightPassed, "every compatibility check passed and UDP 4789 passes between nodes")
}

func summarize(checks []v1alpha1.PreflightCheck) string {
	parts := make([]string, 0, len(checks))
	for _, c := range checks {
		parts = append(parts, c.Name+": "+c.Message)
	}
	return strings.Join(parts, "; ")
}

// resolveTargets decides the values the migration writes: the spec's
// overrides, else what the cluster already holds (so nothing is changed that
// was not asked for), else what is detected. It returns false when a value
// cannot be found; the migration then stalls.
func (p *pass) resolveTargets(ctx context.Context, inst *operatorv1.Installation) (bool, error) {
	if t := p.wr.Status.Targets; t != nil && t.Generation == p.wr.Generation {
		return true, nil
	}
	existing, err := calico.GetServicesEndpoint(ctx, p.r.Client)
	if err != nil {
		return false, err
	}
	t, err := detect.Targets(ctx, p.r.APIReader, p.wr.Spec, inst, existing)
	if errors.Is(err, detect.ErrNotFound) {
		p.stall(conditions.ReasonDetectionFailed, "cannot find the "+err.Error())
		return false, nil
	}
	if err != nil {
		return false, err
	}
	proven, err := p.proveAPIServer(ctx, t, existing)
	if err != nil || proven == nil {
		return false, err
	}
	t.Generation = p.wr.Generation
	p.wr.Status.Targets = t

	if (detect.Endpoint{Host: t.APIServerHost}).IsAddress() {
		p.set(conditions.DirectAPIServerAddress, metav1.ConditionTrue, conditions.ReasonAddress,
			fmt.Sprintf("calico-node will reach the API server at %s:%s%s", t.APIServerHost, t.APIServerPort, *proven))
	} else {
		p.set(conditions.DirectAPIServerAddress, metav1.ConditionFalse, conditions.ReasonHostname,
			fmt.Sprintf("%s is a DNS name: a fresh Calico install can deadlock waiting for DNS (tigera/operator#3615); prefer an address in spec.apiServer.host%s", t.APIServerHost, *proven))
	}
	return true, nil
}

// proveAPIServer proves the address winready is about to write into the
// services endpoint ConfigMap with a TLS handshake verified against the
// cluster CA (ConfigMap kube-root-ca.crt in winready's namespace) for that
// host, so that a typo, another cluster's endpoint or a hostile edit of the
// spec never reaches calico-node on every node. An address the ConfigMap
// already holds is not written and not proven. It returns what to add to the
// DirectAPIServerAddress message, or nil after stalling on an address that
// failed.
func (p *pass) proveAPIServer(ctx context.Context, t *v1alpha1.Targets, existing *corev1.ConfigMap) (*string, error) {
	note := ""
	if existing != nil && existing.Data[calico.ServiceHostKey] == t.APIServerHost && existing.Data[calico.ServicePortKey] == t.APIServerPort {
		return &note, nil
	}
	ca := &corev1.ConfigMap{}
	err := p.r.APIReader.Get(ctx, client.ObjectKey{Namespace: p.r.Namespace, Name: detect.RootCAConfigMap}, ca)
	switch {
	case apierrors.IsNotFound(err) || err == nil && ca.Data[detect.RootCAKey] == "":
		// Kubernetes publishes it in every namespace; without it there is
		// nothing to verify against, and the condition says so.
		note = fmt.Sprintf(" (not proven: ConfigMap %s/%s holds no cluster CA)", p.r.Namespace, detect.RootCAConfigMap)
		return &note, nil
	case err != nil:
		return nil, fmt.Errorf("reading the cluster CA: %w", err)
	}
	if err := detect.Prove(ctx, t.APIServerHost, t.APIServerPort, []byte(ca.Data[detect.RootCAKey])); err != nil {
		msg := fmt.Sprintf("the API server address %s:%s (%s) failed the TLS check against the cluster CA (ConfigMap %s/%s): %v. "+
			"Nothing was changed; set spec.apiServer to an address of this cluster's API server whose serving certificate the "+
			"cluster CA signs for that host", t.APIServerHost, t.APIServerPort, t.Source, p.r.Namespace, detect.RootCAConfigMap, err)
		p.set(conditions.DirectAPIServerAddress, metav1.ConditionFalse, conditions.ReasonAPIServerUnproven, msg)
		if !p.alreadyStalled(conditions.ReasonAPIServerUnproven) {
			p.event(corev1.EventTypeWarning, conditions.ReasonAPIServerUnproven, "Detect", "%s", msg)
		}
		p.stall(conditions.ReasonAPIServerUnproven, msg)
		return nil, nil
	}
	note = "; its TLS certificate is verified against the cluster CA"
	return &note, nil
}

func targetsOf(t *v1alpha1.Targets) phase.Targets {
	if t == nil {
		return phase.Targets{}
	}
	return phase.Targets{ServiceCIDRs: t.ServiceCIDRs, Host: t.APIServerHost, Port: t.APIServerPort}
}

func windowsNodesMessage(names []string) string {
	return fmt.Sprintf("Windows nodes have joined (%s): they need VXLAN without BGP, so the cluster cannot go back", strings.Join(names, ", "))
}

// ensureOriginals makes the status and the durable record agree on the
// originals before any change. The record is written before the first change
// and wins: it outlives the WindowsReadiness, whose status may be lost (a
// delete and re-apply) or stale (a restore from a backup).
func (p *pass) ensureOriginals(ctx context.Context, c *calico.Cluster, steps []phase.Step) error {
	saved, err := record.Load(ctx, p.r.APIReader, p.r.Namespace)
	if err != nil {
		return err
	}
	// Originals written by an earlier winready are completed as Load completes
	// a record, so that the two compare equal.
	if err := record.Complete(ctx, p.r.APIReader, p.wr.Status.Originals); err != nil {
		return err
	}
	switch {
	case saved != nil && p.wr.Status.Originals == nil:
		p.wr.Status.Originals = saved
		p.resetSteps(steps)
		msg := fmt.Sprintf("read back from ConfigMap %s/%s, recorded at %s before the first change; "+
			"the migration goes on from what the cluster shows", p.r.Namespace, record.Name, saved.RecordedAt.UTC().Format(time.RFC3339))
		p.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredRecord, msg)
		p.event(corev1.EventTypeNormal, conditions.ReasonRestoredRecord, "Record", "the originals were %s", msg)
	case saved != nil && !equality.Semantic.DeepEqual(saved, p.wr.Status.Originals):
		p.wr.Status.Originals = saved
		msg := fmt.Sprintf("status.originals disagreed with ConfigMap %s/%s, which was written before the first change and is used",
			p.r.Namespace, record.Name)
		p.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRestoredRecord, msg)
		p.event(corev1.EventTypeWarning, conditions.ReasonOriginalsMismatch, "Record", "%s", msg)
	case saved == nil && p.wr.Status.Originals != nil:
		// Recorded by a winready that kept them in the status only.
		if err := record.Save(ctx, p.r.Client, p.r.Namespace, p.wr.Status.Originals); err != nil {
			return err
		}
	case saved == nil:
		return p.recordOriginals(ctx, c, steps)
	}
	return nil
}

// recordOriginals records the values the migration will change into the
// durable record first, then the status, before the first change.
func (p *pass) recordOriginals(ctx context.Context, c *calico.Cluster, steps []phase.Step) error {
	originals := &v1alpha1.Originals{RecordedAt: metav1.NewTime(p.r.Clock.Now().Truncate(time.Second))}
	for _, step := range steps {
		if err := step.Read(ctx, p.readers(), c); err != nil {
			return fmt.Errorf("recording originals of %s: %w", step.Name(), err)
		}
		step.Record(c, originals)
	}
	phase.RecordMaxUnavailable(c, originals)
	recordNodeIgnored(c, originals)
	if err := record.Save(ctx, p.r.Client, p.r.Namespace, originals); err != nil {
		return err
	}
	p.wr.Status.Originals = originals
	p.resetSteps(steps)
	msg := fmt.Sprintf("recorded in the status and in ConfigMap %s/%s before the first change", p.r.Namespace, record.Name)
	if migrated := record.Migrated(originals); len(migrated) > 0 {
		msg = fmt.Sprintf("%s; the cluster already held %s and no earlier record exists, so a rollback keeps those values",
			msg, strings.Join(migrated, ", "))
		p.event(corev1.EventTypeWarning, conditions.ReasonOriginalsMismatch, "Record", "%s", msg)
	}
	p.set(conditions.OriginalsRecorded, metav1.ConditionTrue, conditions.ReasonRecorded, msg)
	p.progress(conditions.ReasonProgressing, "recorded the original values; starting the migration")
	p.wr.Status.Phase = conditions.Phase(p.wr)
	if err := p.persist(ctx); err != nil {
		return err
	}
	p.event(corev1.EventTypeNormal, "OriginalsRecorded", "Record", "recorded the values the migration will change")
	return nil
}
