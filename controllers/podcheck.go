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

// podCheck proves the pod network before the first change (trigger
// BaselineCheck) and after a disruptive step has settled (its name). It
// starts a round, pairs the pods once they serve, collects their reports and
// compares them with the baseline. It is done once the round for trigger
// passed, or the check is disabled. A round worse than the baseline stops
// the migration with the diagnosis (spec.podNetworkCheck.onFailure Stop), or
// asks for the step to be reverted (Revert: see podCheckRevertDue).
type podCheck struct {
	*Reconciler
	trigger v1alpha1.StepName
}

func (r podCheck) reconcile(ctx context.Context, s *scope) Outcome {
	o := r.check(ctx, s)
	if !o.Done() && o.Err == nil {
		// Its messages name the check and the step: the walk leaves them so.
		o.Step = r.trigger
	}
	return o
}

func (r podCheck) check(ctx context.Context, s *scope) Outcome {
	st := podCheckStatus(s)
	if s.wr.Spec.PodNetworkCheck.Disabled {
		st.Disabled = true
		if err := r.cancel(ctx, s); err != nil {
			return failed(err)
		}
		return done()
	}
	st.Disabled = false
	if r.trigger != BaselineCheck && slices.Contains(st.Passed, r.trigger) {
		return done()
	}
	round := podCheckRound(s, r.trigger)
	switch {
	case round == nil || !strings.HasSuffix(round.Round, roundSuffix(s.wr.Annotations[RerunPodCheckAnnotation])):
		return r.start(ctx, s)
	case round.PlannedAt == nil:
		return r.pair(ctx, s, round)
	case round.CompletedAt == nil:
		return r.collect(ctx, s, round)
	case round.Worse && (r.trigger != BaselineCheck || round.Paired == 0):
		return podCheckFailed(s, round)
	}
	return done()
}

// podCheckStatus is the status of the check, added when missing.
func podCheckStatus(s *scope) *v1alpha1.PodNetworkCheckStatus {
	if s.wr.Status.PodNetworkCheck == nil {
		s.wr.Status.PodNetworkCheck = &v1alpha1.PodNetworkCheckStatus{}
	}
	return s.wr.Status.PodNetworkCheck
}

// podCheckRound is the round for trigger in the status, nil when none ran.
func podCheckRound(s *scope, trigger v1alpha1.StepName) *v1alpha1.PodCheckRound {
	st := podCheckStatus(s)
	if trigger == BaselineCheck {
		return st.Baseline
	}
	if st.Last != nil && st.Last.Trigger == string(trigger) {
		return st.Last
	}
	return nil
}

func podCheckTimeout(s *scope) time.Duration {
	if t := s.wr.Spec.PodNetworkCheck.Timeout; t != nil {
		return t.Duration
	}
	return DefaultPodCheckTimeout
}

func (r podCheck) config(s *scope) preflight.RoundConfig {
	return preflight.RoundConfig{Namespace: r.opts.ProbeNamespace, Image: r.opts.ProbeImage, Duration: podCheckTimeout(s)}
}

func podCheckOwner(s *scope) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WindowsReadiness", Name: s.wr.Name, UID: s.wr.UID}}
}

// start starts a round on every Linux node: its pods and Service.
func (r podCheck) start(ctx context.Context, s *scope) Outcome {
	nodes, err := preflight.ListLinuxNodes(ctx, r.APIReader)
	if err != nil {
		return failed(fmt.Errorf("pod network check: %w", err))
	}
	id := preflight.RoundID(s.wr.Generation, s.now) + roundSuffix(s.wr.Annotations[RerunPodCheckAnnotation])
	if err := podcheck.Start(ctx, r.Client, r.config(s), id, podCheckOwner(s)); err != nil {
		return failed(fmt.Errorf("pod network check: %w", err))
	}
	st := podCheckStatus(s)
	started := metav1.NewTime(s.now)
	round := &v1alpha1.PodCheckRound{Round: id, Trigger: string(r.trigger), StartedAt: &started, Nodes: int32(len(nodes))}
	if r.trigger == BaselineCheck {
		st.Baseline, st.Seed = round, id
	} else {
		st.Last = round
	}
	s.note(corev1.EventTypeNormal, conditions.ReasonPodNetworkCheckStarted, string(r.trigger), "checking the pod network between %d Linux nodes (round %s)", len(nodes), id)
	return progressing(podCheckPoll, "%s: starting the pod network check pods on %d Linux nodes", podCheckLabel(r.trigger), len(nodes))
}

func podCheckLabel(trigger v1alpha1.StepName) string {
	if trigger == BaselineCheck {
		return "pod network check before the first change"
	}
	return "pod network check after step " + string(trigger)
}

// pair waits for the pods to serve, then writes the plan pairing those
// that do. Pods that do not serve by half the round's time are missing.
func (r podCheck) pair(ctx context.Context, s *scope, round *v1alpha1.PodCheckRound) Outcome {
	ns := r.opts.ProbeNamespace
	reports, err := podcheck.ReadReports(ctx, r.Client, ns, round.Round)
	if err != nil {
		return failed(err)
	}
	deadline := round.StartedAt.Add(podCheckTimeout(s) / 2)
	if len(reports) < int(round.Nodes) && s.now.Before(deadline) {
		return progressing(min(deadline.Sub(s.now), podCheckPoll), "%s: %d of %d pods serve",
			podCheckLabel(v1alpha1.StepName(round.Trigger)), len(reports), round.Nodes)
	}
	svc, err := podcheck.ServiceAddr(ctx, r.APIReader, ns)
	if err != nil {
		return failed(err)
	}
	pods := make([]preflight.ProbeNode, 0, len(reports))
	for _, rep := range reports {
		pods = append(pods, preflight.ProbeNode{Name: rep.Node, IP: rep.PodIP})
	}
	if len(pods) == 0 {
		return r.noPodServed(ctx, s, round)
	}
	plan := podcheck.Plan(r.config(s), round.Round, podCheckStatus(s).Seed, pods, podcheck.PlanSettings{Service: svc, DNSName: podcheck.DNSName})
	if err := podcheck.WritePlan(ctx, r.Client, ns, plan, podCheckOwner(s)); err != nil {
		return failed(err)
	}
	if err := r.neverServed(ctx, round, pods); err != nil {
		return failed(err)
	}
	planned := metav1.NewTime(s.now)
	round.PlannedAt, round.Paired = &planned, int32(len(pods))
	return progressing(podCheckPoll, "%s: %d pods paired, testing", podCheckLabel(v1alpha1.StepName(round.Trigger)), len(pods))
}

// noPodServed ends a round in which no check pod served: the check proves
// nothing, before the first change as after a step, so it stops the
// migration.
func (r podCheck) noPodServed(ctx context.Context, s *scope, round *v1alpha1.PodCheckRound) Outcome {
	if err := r.neverServed(ctx, round, nil); err != nil {
		return failed(err)
	}
	ns := r.opts.ProbeNamespace
	completed := metav1.NewTime(s.now)
	round.PlannedAt, round.CompletedAt, round.Worse = &completed, &completed, true
	round.Diagnosis = boundedDiagnosis(fmt.Sprintf("no check pod served within %s on any of the %d Linux nodes: look at the pods of "+
		"DaemonSet %s/%s (kubectl -n %s describe daemonset %s: admission, quota, image), then %s; or set spec.podNetworkCheck.disabled",
		podCheckTimeout(s)/2, round.Nodes, ns, podcheck.Name, ns, podcheck.Name, rerunPodCheckCommand()))
	if err := podcheck.Cleanup(ctx, r.Client, ns); err != nil {
		return failed(err)
	}
	return podCheckFailed(s, round)
}

// neverServed records the Linux nodes whose pod did not serve in time.
func (r podCheck) neverServed(ctx context.Context, round *v1alpha1.PodCheckRound, pods []preflight.ProbeNode) error {
	nodes, err := preflight.ListLinuxNodes(ctx, r.APIReader)
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

// collect waits for the pods' reports, then compares them with the
// baseline, saves the outcome and removes the round.
func (r podCheck) collect(ctx context.Context, s *scope, round *v1alpha1.PodCheckRound) Outcome {
	ns := r.opts.ProbeNamespace
	reports, err := podcheck.ReadReports(ctx, r.Client, ns, round.Round)
	if err != nil {
		return failed(err)
	}
	finished := 0
	for _, rep := range reports {
		if rep.Stage == podcheck.StageDone {
			finished++
		}
	}
	deadline := round.StartedAt.Add(podCheckTimeout(s))
	trigger := v1alpha1.StepName(round.Trigger)
	if finished < int(round.Paired) && s.now.Before(deadline) {
		return progressing(min(deadline.Sub(s.now), podCheckPoll), "%s: %d of %d pods reported", podCheckLabel(trigger), finished, round.Paired)
	}
	pods, plan, err := podcheck.ReadPlan(ctx, r.APIReader, ns, round.Round)
	if err != nil {
		return failed(err)
	}
	if pods == nil {
		// The plan is gone (removed by hand, or replaced): check again.
		return r.start(ctx, s)
	}
	judge(s, round, podcheck.Aggregate(pods, plan, reports))
	completed := metav1.NewTime(s.now)
	round.CompletedAt = &completed
	worse := round.Worse && trigger != BaselineCheck
	if !worse && trigger != BaselineCheck {
		st := podCheckStatus(s)
		st.Passed = append(slices.DeleteFunc(st.Passed, func(n v1alpha1.StepName) bool { return n == trigger }), trigger)
	}
	// The reports go only once the status that sums them up is saved.
	if err := r.checkpoint(ctx, s, "the pod check reports are deleted"); err != nil {
		return failed(err)
	}
	if err := podcheck.Cleanup(ctx, r.Client, ns); err != nil {
		return failed(err)
	}
	kind := corev1.EventTypeNormal
	if round.FailingPairs > 0 || round.Worse {
		kind = corev1.EventTypeWarning
	}
	s.note(kind, conditions.ReasonPodNetworkChecked, round.Trigger, "%s", bounded(podCheckLabel(trigger)+": "+round.Diagnosis))
	if worse {
		return podCheckFailed(s, round)
	}
	return done()
}

// judge fills a finished round from the pods' reports, compared pair by
// pair with the baseline.
func judge(s *scope, round *v1alpha1.PodCheckRound, sum podcheck.Summary) {
	in := podcheck.Input{After: sum.Pairs, PodMTU: sum.PodMTU, Rerun: rerunPodCheckCommand()}
	missing := append(slices.Clone(round.Missing), sum.Missing...)
	in.DNSFailing, in.ServiceFailing, in.Missing = sum.DNSFailing, sum.ServiceFailing, missing
	if base := podCheckStatus(s).Baseline; base != nil && round != base {
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

// podCheckFailed stops the migration with the diagnosis of a round worse
// than the baseline; in Revert mode the walk first reverts the step.
func podCheckFailed(s *scope, round *v1alpha1.PodCheckRound) Outcome {
	msg := fmt.Sprintf("%s: the pod network is worse than before the first change, the migration stopped: %s. "+
		"To go back instead, set spec.direction: Rollback", podCheckLabel(v1alpha1.StepName(round.Trigger)), round.Diagnosis)
	if v1alpha1.StepName(round.Trigger) == BaselineCheck {
		msg = fmt.Sprintf("%s could not run, nothing was changed: %s", podCheckLabel(BaselineCheck), round.Diagnosis)
	}
	if step, due := podCheckRevertDue(s); due {
		return stop(conditions.ReasonRevertingStep, "reverting step %s: %s", step, msg).lookAgain(podCheckPoll)
	}
	if st := podCheckStatus(s); st.Reverted == v1alpha1.StepName(round.Trigger) {
		msg = fmt.Sprintf("step %s was reverted because %s", st.Reverted, msg)
	}
	return stop(ReasonPodNetworkCheckFailed, "%s", msg)
}

// podCheckRevertDue names the step to revert: the last round, after it,
// found the pod network worse, spec.podNetworkCheck.onFailure is Revert,
// and the step has not been reverted yet. The walk reverts it (its changes
// in the rollback direction, waiting for Calico as a rollback does), then
// calls podCheckReverted.
func podCheckRevertDue(s *scope) (v1alpha1.StepName, bool) {
	st := podCheckStatus(s)
	last := st.Last
	if s.wr.Spec.PodNetworkCheck.OnFailure != v1alpha1.PodCheckRevert || last == nil || last.CompletedAt == nil || !last.Worse ||
		!strings.HasSuffix(last.Round, roundSuffix(s.wr.Annotations[RerunPodCheckAnnotation])) {
		return "", false
	}
	step := v1alpha1.StepName(last.Trigger)
	return step, st.Reverted != step
}

// podCheckReverted records that the walk reverted step after a worse round,
// and stops with the diagnosis.
func podCheckReverted(s *scope, step v1alpha1.StepName) Outcome {
	st := podCheckStatus(s)
	st.Reverted = step
	if st.Last == nil {
		return done()
	}
	return podCheckFailed(s, st.Last)
}

// podCheckBlocked says why step may not be changed: the pod network got
// worse after it, and no new check was asked for. The walk's mayChange
// consults it, so that a reverted step is not applied again by itself.
func podCheckBlocked(s *scope, step v1alpha1.StepName) Outcome {
	st := s.wr.Status.PodNetworkCheck
	if st == nil || st.Last == nil || st.Last.Trigger != string(step) || !st.Last.Worse ||
		!strings.HasSuffix(st.Last.Round, roundSuffix(s.wr.Annotations[RerunPodCheckAnnotation])) {
		return done()
	}
	return stop(ReasonPodNetworkCheckFailed, "the pod network got worse after this step; fix it, then %s", rerunPodCheckCommand())
}

// cancel removes a round still running, when the spec no longer wants
// it (disabled, paused, rolled back).
func (r podCheck) cancel(ctx context.Context, s *scope) error {
	prev := s.before.Status.PodNetworkCheck
	running := func(r *v1alpha1.PodCheckRound) bool { return r != nil && r.CompletedAt == nil }
	if prev == nil || (!running(prev.Baseline) && !running(prev.Last)) {
		return nil
	}
	if err := podcheck.Cleanup(ctx, r.Client, r.opts.ProbeNamespace); err != nil {
		return err
	}
	st := podCheckStatus(s)
	if running(st.Baseline) {
		st.Baseline = nil
	}
	if running(st.Last) {
		st.Last = nil
	}
	s.note(corev1.EventTypeNormal, conditions.ReasonPodNetworkCheckStopped, "PodNetworkCheck", "stopped the pod network check as the spec asks")
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
