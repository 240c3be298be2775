package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/podcheck"
	"github.com/winready/winready/internal/preflight"
)

// The pod network check's rights: its pods, their Service and its plan in
// the probe namespace (reports are ConfigMaps the probe's rules cover).
// +kubebuilder:rbac:groups=apps,namespace=winready-probe,resources=daemonsets,resourceNames=winready-podcheck,verbs=delete
// +kubebuilder:rbac:groups="",namespace=winready-probe,resources=services,verbs=create
// +kubebuilder:rbac:groups="",namespace=winready-probe,resources=services,resourceNames=winready-podcheck,verbs=get;delete
// +kubebuilder:rbac:groups="",namespace=winready-probe,resources=configmaps,resourceNames=winready-podcheck,verbs=get;delete

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
// starts a round, pairs the pods once they serve, collects their reports and
// compares them with the baseline. done is true once the round for trigger
// passed, or the check is disabled. A round worse than the baseline stalls
// the migration with the diagnosis (spec.podNetworkCheck.onFailure Stop), or
// asks for the step to be reverted (Revert: see podCheckRevertDue).
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
	round := p.podCheckRound(trigger)
	now := p.r.Clock.Now()
	switch {
	case round == nil || !strings.HasSuffix(round.Round, roundSuffix(p.wr.Annotations[RerunPodCheckAnnotation])):
		return false, ctrl.Result{RequeueAfter: podCheckPoll}, p.startPodCheck(ctx, trigger, now)
	case round.PlannedAt == nil:
		res, err := p.pairPodCheck(ctx, round, now)
		return false, res, err
	case round.CompletedAt == nil:
		return p.collectPodCheck(ctx, round, now)
	case round.Worse && (trigger != BaselineCheck || round.Paired == 0):
		p.podCheckFailed(round)
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

func (p *pass) podCheckTimeout() time.Duration {
	if t := p.wr.Spec.PodNetworkCheck.Timeout; t != nil {
		return t.Duration
	}
	return DefaultPodCheckTimeout
}

func (p *pass) podCheckConfig() preflight.RoundConfig {
	return preflight.RoundConfig{Namespace: p.r.ProbeNamespace, Image: p.r.ProbeImage, Duration: p.podCheckTimeout()}
}

func (p *pass) podCheckOwner() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WindowsReadiness", Name: p.wr.Name, UID: p.wr.UID}}
}

// startPodCheck starts a round on every Linux node: its pods and Service.
func (p *pass) startPodCheck(ctx context.Context, trigger v1alpha1.StepName, now time.Time) error {
	nodes, err := preflight.ListLinuxNodes(ctx, p.r.APIReader)
	if err != nil {
		return fmt.Errorf("pod network check: %w", err)
	}
	id := preflight.RoundID(p.wr.Generation, now) + roundSuffix(p.wr.Annotations[RerunPodCheckAnnotation])
	if err := podcheck.Start(ctx, p.r.Client, p.podCheckConfig(), id, p.podCheckOwner()); err != nil {
		return fmt.Errorf("pod network check: %w", err)
	}
	st := p.podCheckStatus()
	started := metav1.NewTime(now)
	round := &v1alpha1.PodCheckRound{Round: id, Trigger: string(trigger), StartedAt: &started, Nodes: int32(len(nodes))}
	if trigger == BaselineCheck {
		st.Baseline, st.Seed = round, id
	} else {
		st.Last = round
	}
	p.event(corev1.EventTypeNormal, "PodNetworkCheckStarted", string(trigger), "checking the pod network between %d Linux nodes (round %s)", len(nodes), id)
	p.progress(conditions.ReasonProgressing, fmt.Sprintf("%s: starting the pod network check pods on %d Linux nodes", podCheckLabel(trigger), len(nodes)))
	return nil
}

func podCheckLabel(trigger v1alpha1.StepName) string {
	if trigger == BaselineCheck {
		return "pod network check before the first change"
	}
	return "pod network check after step " + string(trigger)
}

// pairPodCheck waits for the pods to serve, then writes the plan pairing
// those that do. Pods that do not serve by half the round's time are missing.
func (p *pass) pairPodCheck(ctx context.Context, round *v1alpha1.PodCheckRound, now time.Time) (ctrl.Result, error) {
	ns := p.r.ProbeNamespace
	reports, err := podcheck.ReadReports(ctx, p.r.Client, ns, round.Round)
	if err != nil {
		return ctrl.Result{}, err
	}
	deadline := round.StartedAt.Add(p.podCheckTimeout() / 2)
	if len(reports) < int(round.Nodes) && now.Before(deadline) {
		p.progress(conditions.ReasonProgressing, fmt.Sprintf("%s: %d of %d pods serve", podCheckLabel(v1alpha1.StepName(round.Trigger)), len(reports), round.Nodes))
		return ctrl.Result{RequeueAfter: min(deadline.Sub(now), podCheckPoll)}, nil
	}
	svc, err := podcheck.ServiceAddr(ctx, p.r.APIReader, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	pods := make([]preflight.ProbeNode, 0, len(reports))
	for _, r := range reports {
		pods = append(pods, preflight.ProbeNode{Name: r.Node, IP: r.PodIP})
	}
	if len(pods) == 0 {
		return ctrl.Result{}, p.noPodServed(ctx, round, now)
	}
	plan := podcheck.Plan(p.podCheckConfig(), round.Round, p.podCheckStatus().Seed, pods, podcheck.PlanSettings{Service: svc, DNSName: podcheck.DNSName})
	if err := podcheck.WritePlan(ctx, p.r.Client, ns, plan, p.podCheckOwner()); err != nil {
		return ctrl.Result{}, err
	}
	if err := p.neverServed(ctx, round, pods); err != nil {
		return ctrl.Result{}, err
	}
	planned := metav1.NewTime(now)
	round.PlannedAt, round.Paired = &planned, int32(len(pods))
	return ctrl.Result{RequeueAfter: podCheckPoll}, nil
}

// noPodServed ends a round in which no check pod served: the check proves
// nothing, before the first change as after a step, so it stops the
// migration.
func (p *pass) noPodServed(ctx context.Context, round *v1alpha1.PodCheckRound, now time.Time) error {
	if err := p.neverServed(ctx, round, nil); err != nil {
		return err
	}
	completed := metav1.NewTime(now)
	round.PlannedAt, round.CompletedAt, round.Worse = &completed, &completed, true
	round.Diagnosis = boundedDiagnosis(fmt.Sprintf("no check pod served within %s on any of the %d Linux nodes: look at the pods of "+
		"DaemonSet %s/%s (kubectl -n %s describe daemonset %s: admission, quota, image), then %s; or set spec.podNetworkCheck.disabled",
		p.podCheckTimeout()/2, round.Nodes, p.r.ProbeNamespace, podcheck.Name, p.r.ProbeNamespace, podcheck.Name, rerunPodCheckCommand()))
	p.podCheckFailed(round)
	return podcheck.Cleanup(ctx, p.r.Client, p.r.ProbeNamespace)
}

// neverServed records the Linux nodes whose pod did not serve in time.
func (p *pass) neverServed(ctx context.Context, round *v1alpha1.PodCheckRound, pods []preflight.ProbeNode) error {
	nodes, err := preflight.ListLinuxNodes(ctx, p.r.APIReader)
	if err != nil {
		return fmt.Errorf("pod network check: %w", err)
	}
	served := make(map[string]bool, len(pods))
	for _, pod := range pods {
		served[pod.Name] = true
	}
	round.Missing = nil
	for _, n := range nodes {
		if !served[n.Name] && len(round.Missing) < v1alpha1.MaxListed {
			round.Missing = append(round.Missing, n.Name)
		}
	}
	return nil
}

// collectPodCheck waits for the pods' reports, then compares them with the
// baseline, saves the outcome and removes the round.
func (p *pass) collectPodCheck(ctx context.Context, round *v1alpha1.PodCheckRound, now time.Time) (bool, ctrl.Result, error) {
	ns := p.r.ProbeNamespace
	reports, err := podcheck.ReadReports(ctx, p.r.Client, ns, round.Round)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	done := 0
	for _, r := range reports {
		if r.Stage == podcheck.StageDone {
			done++
		}
	}
	deadline := round.StartedAt.Add(p.podCheckTimeout())
	trigger := v1alpha1.StepName(round.Trigger)
	if done < int(round.Paired) && now.Before(deadline) {
		p.progress(conditions.ReasonProgressing, fmt.Sprintf("%s: %d of %d pods reported", podCheckLabel(trigger), done, round.Paired))
		return false, ctrl.Result{RequeueAfter: min(deadline.Sub(now), podCheckPoll)}, nil
	}
	pods, plan, err := podcheck.ReadPlan(ctx, p.r.APIReader, ns, round.Round)
	if err != nil {
		return false, ctrl.Result{}, err
	}
	if pods == nil {
		// The plan is gone (removed by hand, or replaced): check again.
		return false, ctrl.Result{RequeueAfter: podCheckPoll}, p.startPodCheck(ctx, trigger, now)
	}
	p.judge(round, podcheck.Aggregate(pods, plan, reports))
	completed := metav1.NewTime(now)
	round.CompletedAt = &completed
	if !round.Worse && trigger != BaselineCheck {
		st := p.podCheckStatus()
		st.Passed = append(slices.DeleteFunc(st.Passed, func(s v1alpha1.StepName) bool { return s == trigger }), trigger)
	}
	if round.Worse && trigger != BaselineCheck {
		p.podCheckFailed(round)
	}
	// The reports go only once the status that sums them up is saved.
	p.wr.Status.Phase = conditions.Phase(p.wr)
	if err := p.persist(ctx); err != nil {
		return false, ctrl.Result{}, err
	}
	if err := podcheck.Cleanup(ctx, p.r.Client, ns); err != nil {
		return false, ctrl.Result{}, err
	}
	kind := corev1.EventTypeNormal
	if round.FailingPairs > 0 || round.Worse {
		kind = corev1.EventTypeWarning
	}
	p.event(kind, "PodNetworkChecked", round.Trigger, "%s", bounded(podCheckLabel(trigger)+": "+round.Diagnosis))
	if round.Worse && trigger != BaselineCheck {
		return false, ctrl.Result{}, nil
	}
	return true, ctrl.Result{}, nil
}

// judge fills a finished round from the pods' reports, compared pair by
// pair with the baseline.
func (p *pass) judge(round *v1alpha1.PodCheckRound, sum podcheck.Summary) {
	in := podcheck.Input{After: sum.Pairs, PodMTU: sum.PodMTU, Rerun: rerunPodCheckCommand()}
	missing := append(slices.Clone(round.Missing), sum.Missing...)
	in.DNSFailing, in.ServiceFailing, in.Missing = sum.DNSFailing, sum.ServiceFailing, missing
	if base := p.podCheckStatus().Baseline; base != nil && round != base {
		for _, f := range base.Failing {
			in.Baseline = append(in.Baseline, pairOf(f))
		}
		in.DNSFailing = without(sum.DNSFailing, base.DNSFailing)
		in.ServiceFailing = without(sum.ServiceFailing, base.ServiceFailing)
		in.Missing = without(missing, base.Missing)
	}
	d := podcheck.Diagnose(in)
	round.PodMTU, round.TestedPairs = int32(sum.PodMTU), int32(len(sum.Pairs))
	round.FailingPairs = int32(len(sum.Pairs) - d.Counts[podcheck.VerdictPass])
	round.WorsePairs = round.FailingPairs - int32(d.Counts[podcheck.VerdictAsBaseline])
	round.Failing = nil
	for _, v := range d.Listed {
		round.Failing = append(round.Failing, v1alpha1.PodPairResult{From: v.From, To: v.To, Verdict: v1alpha1.PodCheckVerdict(v.Verdict),
			Checks: v.Checks(), PathMTU: int32(v.PathMTU)})
	}
	round.DNSFailing, round.ServiceFailing = firstListed(sum.DNSFailing), firstListed(sum.ServiceFailing)
	round.Missing = firstListed(missing)
	round.Worse, round.Diagnosis = d.Worse, boundedDiagnosis(d.Message)
}

func pairOf(f v1alpha1.PodPairResult) podcheck.Pair {
	c := strings.Split(f.Checks+",,", ",")
	return podcheck.Pair{From: f.From, To: f.To, ICMP: podcheck.Outcome(c[0]), TCPSmall: podcheck.Outcome(c[1]),
		TCPFull: podcheck.Outcome(c[2]), PathMTU: int(f.PathMTU)}
}

// without is names less those in the baseline's list.
func without(names, baseline []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(baseline, n) })
}

func firstListed(names []string) []string { return names[:min(len(names), v1alpha1.MaxListed)] }

// maxDiagnosis is the CRD's limit on a round's diagnosis.
const maxDiagnosis = 2048

// boundedDiagnosis cuts a diagnosis to its field's limit.
func boundedDiagnosis(s string) string {
	if len(s) <= maxDiagnosis {
		return s
	}
	cut := maxDiagnosis - len(" ...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " ..."
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
		!strings.HasSuffix(last.Round, roundSuffix(p.wr.Annotations[RerunPodCheckAnnotation])) {
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
	if st == nil || st.Last == nil || st.Last.Trigger != string(step) || !st.Last.Worse ||
		!strings.HasSuffix(st.Last.Round, roundSuffix(p.wr.Annotations[RerunPodCheckAnnotation])) {
		return "", ""
	}
	return ReasonPodNetworkCheckFailed, fmt.Sprintf("the pod network got worse after this step; fix it, then %s", rerunPodCheckCommand())
}

// stopPodCheck removes a round still running, when the spec no longer wants
// it (disabled, paused, rolled back).
func (p *pass) stopPodCheck(ctx context.Context) error {
	prev := p.before.Status.PodNetworkCheck
	running := func(r *v1alpha1.PodCheckRound) bool { return r != nil && r.CompletedAt == nil }
	if prev == nil || (!running(prev.Baseline) && !running(prev.Last)) {
		return nil
	}
	if err := podcheck.Cleanup(ctx, p.r.Client, p.r.ProbeNamespace); err != nil {
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
