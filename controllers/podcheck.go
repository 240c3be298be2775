package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/round"
)

// The pod network check's rights: its pods and their Service in the probe
// namespace (plans and reports are ConfigMaps the probe's rules cover).
// +kubebuilder:rbac:groups=apps,namespace=winready-probe,resources=daemonsets,resourceNames=winready-podcheck,verbs=delete
// +kubebuilder:rbac:groups="",namespace=winready-probe,resources=services,verbs=create
// +kubebuilder:rbac:groups="",namespace=winready-probe,resources=services,resourceNames=winready-podcheck,verbs=get;delete

// BaselineCheck is the trigger of the round before the first change.
const BaselineCheck v1alpha1.StepName = "Baseline"

// RerunPodCheckAnnotation asks for the pod network check to run again after
// a failed round: any new value does.
const RerunPodCheckAnnotation = "winready.io/rerun-podcheck"

// ReasonPodNetworkCheckFailed stalls a migration whose pod network got worse.
const ReasonPodNetworkCheckFailed = conditions.ReasonPodNetworkCheckFailed

// DefaultPodCheckTimeout matches the CRD default of spec.podNetworkCheck.timeout.
const DefaultPodCheckTimeout = 3 * time.Minute

// podCheckPoll is how soon a round is looked at again while pods start or
// test; their reports, in the cache, wake the reconciler sooner.
const podCheckPoll = 5 * time.Second

// checkPodNetwork proves the pod network before the first change (trigger
// BaselineCheck) and after a disruptive step has settled (its name). It
// starts a round, in which the pods are paired once they serve, and judges
// their reports against the baseline. done is true once the round for
// trigger passed, or the check is disabled. A round worse than the baseline
// stalls the migration with the diagnosis (spec.podNetworkCheck.onFailure
// Stop), or asks for the step to be reverted (Revert: see
// podCheckRevertDue).
func (p *pass) checkPodNetwork(ctx context.Context, trigger v1alpha1.StepName) (done bool, res ctrl.Result, err error) {
	st := p.podCheckStatus()
	if p.wr.Spec.PodNetworkCheck.Disabled {
		st.Disabled = true
		return true, ctrl.Result{}, p.stopPodCheck(ctx)
	}
	st.Disabled = false
	if trigger != BaselineCheck && slices.Contains(st.Passed, trigger) {
		return true, ctrl.Result{}, nil
	}
	r := p.podCheckRound(trigger)
	now := p.r.Clock.Now()
	switch {
	case r == nil || !p.podCheckRerunSeen(r):
		return false, ctrl.Result{RequeueAfter: podCheckPoll}, p.startPodCheck(ctx, trigger, now)
	case r.CompletedAt == nil:
		return p.collectPodCheck(ctx, r, now)
	case r.Worse && (trigger != BaselineCheck || r.Paired == 0):
		p.podCheckFailed(r)
		return false, ctrl.Result{}, nil
	}
	return true, ctrl.Result{}, nil
}

// podCheckStatus is the status of the check, added when missing.
func (p *pass) podCheckStatus() *v1alpha1.PodNetworkCheckStatus {
	if p.wr.Status.PodNetworkCheck == nil {
		p.wr.Status.PodNetworkCheck = &v1alpha1.PodNetworkCheckStatus{}
	}
	return p.wr.Status.PodNetworkCheck
}

// podCheckRound is the round for trigger in the status, nil when none ran.
func (p *pass) podCheckRound(trigger v1alpha1.StepName) *v1alpha1.PodCheckRound {
	st := p.podCheckStatus()
	if trigger == BaselineCheck {
		return st.Baseline
	}
	if st.Last != nil && st.Last.Trigger == string(trigger) {
		return st.Last
	}
	return nil
}

// podCheckRerunSeen says whether r ran for the rerun annotation as it is:
// a new value asks for a new round.
func (p *pass) podCheckRerunSeen(r *v1alpha1.PodCheckRound) bool {
	return round.TokenOfState(&r.RoundState) == round.TokenOf(p.wr.Annotations[RerunPodCheckAnnotation])
}

func (p *pass) podCheckTimeout() time.Duration {
	if t := p.wr.Spec.PodNetworkCheck.Timeout; t != nil {
		return t.Duration
	}
	return DefaultPodCheckTimeout
}

// podCheckEngine is the round engine for the check, and the spec of round
// id: the pods serve within half the timeout, and test and report within
// the rest; a round after a step tests the baseline's pairs.
func (p *pass) podCheckEngine(id round.ID, token round.Token) (*podcheck.Engine, round.Spec[podcheck.Params]) {
	ns := p.r.ProbeNamespace
	return &podcheck.Engine{Kind: podcheck.RoundKind, Client: p.r.Client, Reader: p.r.APIReader, Namespace: ns, Image: p.r.ProbeImage},
		round.Spec[podcheck.Params]{ID: id, Token: token, Seed: p.podCheckStatus().Seed, Timeout: p.podCheckTimeout(), Owner: round.Owner(p.wr),
			Params: func(ctx context.Context) (podcheck.Params, error) {
				svc, err := podcheck.ServiceAddr(ctx, p.r.APIReader, ns)
				return podcheck.Params{Service: svc, DNSName: podcheck.DNSName}, err
			}}
}

// startPodCheck starts a round on every Linux node: its pods and Service.
func (p *pass) startPodCheck(ctx context.Context, trigger v1alpha1.StepName, now time.Time) error {
	r := &v1alpha1.PodCheckRound{Trigger: string(trigger)}
	id := round.NewID(p.wr.Generation, now)
	e, spec := p.podCheckEngine(id, round.TokenOf(p.wr.Annotations[RerunPodCheckAnnotation]))
	if trigger == BaselineCheck {
		// Every later round tests the pairs the baseline tested.
		spec.Seed = string(id)
	}
	if err := e.Start(ctx, now, spec, &r.RoundState); err != nil {
		return fmt.Errorf("pod network check: %w", err)
	}
	st := p.podCheckStatus()
	if trigger == BaselineCheck {
		st.Baseline, st.Seed = r, spec.Seed
	} else {
		st.Last = r
	}
	p.event(corev1.EventTypeNormal, "PodNetworkCheckStarted", string(trigger), "checking the pod network between %d Linux nodes (round %s)", r.Nodes, id)
	p.progress(conditions.ReasonProgressing, fmt.Sprintf("%s: starting the pod network check pods on %d Linux nodes", podCheckLabel(trigger), r.Nodes))
	return nil
}

func podCheckLabel(trigger v1alpha1.StepName) string {
	if trigger == BaselineCheck {
		return "pod network check before the first change"
	}
	return "pod network check after step " + string(trigger)
}

// collectPodCheck pairs the pods once they serve, waits for their reports,
// then compares them with the baseline, saves the outcome and removes the
// round.
func (p *pass) collectPodCheck(ctx context.Context, r *v1alpha1.PodCheckRound, now time.Time) (bool, ctrl.Result, error) {
	trigger := v1alpha1.StepName(r.Trigger)
	e, spec := p.podCheckEngine(round.ID(r.Round), round.TokenOfState(&r.RoundState))
	progress, err := e.Advance(ctx, now, spec, &r.RoundState)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if progress.Unpaired != nil || progress.NoneServed {
		// The Linux nodes whose pod did not serve in time.
		r.Missing = round.FirstListed(progress.Unpaired)
	}
	switch {
	case progress.NoneServed:
		return false, ctrl.Result{}, p.noPodServed(ctx, e, r, now)
	case progress.Stage == round.Pairing:
		p.progress(conditions.ReasonProgressing, fmt.Sprintf("%s: %d of %d pods serve", podCheckLabel(trigger), progress.Reported, progress.Expected))
		return false, ctrl.Result{RequeueAfter: min(progress.Wait, podCheckPoll)}, nil
	case progress.Stage == round.Collecting:
		p.progress(conditions.ReasonProgressing, fmt.Sprintf("%s: %d of %d pods reported", podCheckLabel(trigger), progress.Reported, progress.Expected))
		return false, ctrl.Result{RequeueAfter: min(progress.Wait, podCheckPoll)}, nil
	}
	res, ok, err := e.Results(ctx, &r.RoundState)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if !ok {
		// The plans are gone (removed by hand, or replaced): check again.
		return false, ctrl.Result{RequeueAfter: podCheckPoll}, p.startPodCheck(ctx, trigger, now)
	}
	st := p.podCheckStatus()
	var baseline *v1alpha1.PodCheckRound
	if r != st.Baseline {
		baseline = st.Baseline
	}
	podcheck.Judge(r, res, baseline, rerunPodCheckCommand())
	completed := metav1.NewTime(now)
	r.CompletedAt = &completed
	if !r.Worse && trigger != BaselineCheck {
		st.Passed = append(slices.DeleteFunc(st.Passed, func(s v1alpha1.StepName) bool { return s == trigger }), trigger)
	}
	if r.Worse && trigger != BaselineCheck {
		p.podCheckFailed(r)
	}
	// The reports go only once the status that sums them up is saved.
	p.wr.Status.Phase = conditions.Phase(p.wr)
	if err := p.persist(ctx); err != nil {
		return false, ctrl.Result{}, err
	}
	if err := e.Cleanup(ctx); err != nil {
		return false, ctrl.Result{}, err
	}
	kind := corev1.EventTypeNormal
	if r.FailingPairs > 0 || r.Worse {
		kind = corev1.EventTypeWarning
	}
	p.event(kind, "PodNetworkChecked", r.Trigger, "%s", bounded(podCheckLabel(trigger)+": "+r.Diagnosis))
	if r.Worse && trigger != BaselineCheck {
		return false, ctrl.Result{}, nil
	}
	return true, ctrl.Result{}, nil
}

// noPodServed ends a round in which no check pod served: the check proves
// nothing, before the first change as after a step, so it stops the
// migration.
func (p *pass) noPodServed(ctx context.Context, e *podcheck.Engine, r *v1alpha1.PodCheckRound, now time.Time) error {
	completed := metav1.NewTime(now)
	r.PlannedAt, r.CompletedAt, r.Worse = &completed, &completed, true
	r.Diagnosis = round.Truncate(fmt.Sprintf("no check pod served within %s on any of the %d Linux nodes: look at the pods of "+
		"DaemonSet %s/%s (kubectl -n %s describe daemonset %s: admission, quota, image), then %s; or set spec.podNetworkCheck.disabled",
		p.podCheckTimeout()/2, r.Nodes, p.r.ProbeNamespace, podcheck.Name, p.r.ProbeNamespace, podcheck.Name, rerunPodCheckCommand()),
		podcheck.MaxDiagnosis)
	p.podCheckFailed(r)
	return e.Cleanup(ctx)
}

func rerunPodCheckCommand() string {
	return fmt.Sprintf("kubectl annotate wr default %s=$(date +%%s) --overwrite", RerunPodCheckAnnotation)
}

// podCheckFailed stalls the migration with the diagnosis of a round worse
// than the baseline; in Revert mode once the walk has reverted the step.
func (p *pass) podCheckFailed(round *v1alpha1.PodCheckRound) {
	msg := fmt.Sprintf("%s: the pod network is worse than before the first change, the migration stopped: %s. "+
		"To go back instead, set spec.direction: Rollback", podCheckLabel(v1alpha1.StepName(round.Trigger)), round.Diagnosis)
	if v1alpha1.StepName(round.Trigger) == BaselineCheck {
		msg = fmt.Sprintf("%s could not run, nothing was changed: %s", podCheckLabel(BaselineCheck), round.Diagnosis)
	}
	if step, due := p.podCheckRevertDue(); due {
		p.progress(ReasonPodNetworkCheckFailed, fmt.Sprintf("reverting step %s: %s", step, msg))
		return
	}
	if st := p.podCheckStatus(); st.Reverted == v1alpha1.StepName(round.Trigger) {
		msg = fmt.Sprintf("step %s was reverted because %s", st.Reverted, msg)
	}
	if !p.alreadyStalled(ReasonPodNetworkCheckFailed) {
		p.event(corev1.EventTypeWarning, ReasonPodNetworkCheckFailed, round.Trigger, "%s", bounded(msg))
	}
	p.stall(ReasonPodNetworkCheckFailed, msg)
}

// podCheckRevertDue names the step to revert: the last round, after it,
// found the pod network worse, spec.podNetworkCheck.onFailure is Revert,
// and the step has not been reverted yet. The walk reverts it (its changes
// in the rollback direction, waiting for Calico as a rollback does), then
// calls podCheckReverted.
func (p *pass) podCheckRevertDue() (v1alpha1.StepName, bool) {
	st := p.podCheckStatus()
	last := st.Last
	if p.wr.Spec.PodNetworkCheck.OnFailure != v1alpha1.PodCheckRevert || last == nil || last.CompletedAt == nil || !last.Worse ||
		!p.podCheckRerunSeen(last) {
		return "", false
	}
	step := v1alpha1.StepName(last.Trigger)
	return step, st.Reverted != step
}

// podCheckReverted records that the walk reverted step after a worse round,
// and stalls with the diagnosis.
func (p *pass) podCheckReverted(step v1alpha1.StepName) {
	st := p.podCheckStatus()
	st.Reverted = step
	if st.Last != nil {
		p.podCheckFailed(st.Last)
	}
}

// podCheckBlocked says why step may not be changed: the pod network got
// worse after it, and no new check was asked for. The walk's mayChange
// consults it, so that a reverted step is not applied again by itself.
func (p *pass) podCheckBlocked(step v1alpha1.StepName) (reason, why string) {
	st := p.wr.Status.PodNetworkCheck
	if st == nil || st.Last == nil || st.Last.Trigger != string(step) || !st.Last.Worse || !p.podCheckRerunSeen(st.Last) {
		return "", ""
	}
	return ReasonPodNetworkCheckFailed, fmt.Sprintf("the pod network got worse after this step; fix it, then %s", rerunPodCheckCommand())
}

// stopPodCheck removes a round still running, when the spec no longer wants
// it (disabled, paused, a dry run, rolled back).
func (p *pass) stopPodCheck(ctx context.Context) error {
	prev := p.before.Status.PodNetworkCheck
	running := func(r *v1alpha1.PodCheckRound) bool { return r != nil && r.CompletedAt == nil }
	if prev == nil || !running(prev.Baseline) && !running(prev.Last) {
		return nil
	}
	r := prev.Last
	if running(prev.Baseline) {
		r = prev.Baseline
	}
	e, _ := p.podCheckEngine(round.ID(r.Round), "")
	if stopped, err := e.Stop(ctx, &r.RoundState); err != nil || !stopped {
		return err
	}
	st := p.podCheckStatus()
	if running(st.Baseline) {
		st.Baseline = nil
	}
	if running(st.Last) {
		st.Last = nil
	}
	p.event(corev1.EventTypeNormal, "PodNetworkCheckStopped", "PodNetworkCheck", "stopped the pod network check as the spec asks")
	return nil
}

// podCheckPreflight is the preflight's entry for the pod network check: a
// warning when the spec turns it off.
func podCheckPreflight(spec v1alpha1.PodNetworkCheckSpec) v1alpha1.PreflightCheck {
	if spec.Disabled {
		return v1alpha1.PreflightCheck{Name: "PodNetworkCheck", Result: v1alpha1.CheckWarn,
			Message: "spec.podNetworkCheck.disabled: nothing proves that pods still reach each other (TCP, MTU, DNS, Services) after Encapsulation, BGP and ServicesEndpoint"}
	}
	action := spec.OnFailure
	if action == "" {
		action = v1alpha1.PodCheckStop
	}
	return v1alpha1.PreflightCheck{Name: "PodNetworkCheck", Result: v1alpha1.CheckPass,
		Message: fmt.Sprintf("the pod network is checked before the first change and after Encapsulation, BGP and ServicesEndpoint; a worse result: %s", action)}
}
