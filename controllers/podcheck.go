package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
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
const RerunPodCheckAnnotation = v1alpha1.RerunPodCheckAnnotation

// ReasonPodNetworkCheckFailed stalls a migration whose pod network got worse.
const ReasonPodNetworkCheckFailed = conditions.ReasonPodNetworkCheckFailed

// DefaultPodCheckTimeout matches the CRD default of spec.podNetworkCheck.timeout.
const DefaultPodCheckTimeout = 3 * time.Minute

// podCheckPoll is how soon a round is looked at again while pods start or
// test; their reports, in the cache, wake the reconciler sooner.
const podCheckPoll = 5 * time.Second

// podCheck proves the pod network before the first change (trigger
// BaselineCheck) and after a disruptive step has settled (its name), on the
// round engine: it starts a round, in which the pods are paired once they
// serve, and judges their reports against the baseline. It is done once the
// round for trigger passed, or the check is disabled. A round worse than the
// baseline stops the migration with the diagnosis
// (spec.podNetworkCheck.onFailure Stop), or asks for the step to be reverted
// (Revert: see podCheckRevertDue).
// podNetworkCheck is the rider of the pod network check: a disruptive step
// of a migration is done once the pod network is proven after it (podCheck).
type podNetworkCheck struct{}

func (podNetworkCheck) join(*scope, *stepTurn) {}

func (podNetworkCheck) prepare(context.Context, walk, *scope, *stepTurn) error { return nil }

func (podNetworkCheck) prove(ctx context.Context, w walk, s *scope, t *stepTurn) Outcome {
	step := t.step.Name()
	if _, ok := disruptive[step]; !ok || t.in.Direction != v1alpha1.DirectionMigrate {
		return done()
	}
	return podCheck{w.Reconciler, step}.reconcile(ctx, s)
}

func (podNetworkCheck) plan(_ *scope, _ phase.Input, plan []v1alpha1.PlannedChange) []v1alpha1.PlannedChange {
	return plan
}

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
	rd := podCheckRound(s, r.trigger)
	var rs *v1alpha1.RoundState
	if rd != nil && podCheckRerunSeen(s, rd) {
		rs = &rd.RoundState
	}
	if o, over := r.step(s, rd).run(ctx, s, rs); !over {
		return o
	}
	if rd.Worse && (r.trigger != BaselineCheck || rd.Paired == 0) {
		return podCheckFailed(s, rd)
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

// podCheckRerunSeen says whether rd ran for the rerun annotation as it is:
// a new value asks for a new round.
func podCheckRerunSeen(s *scope, rd *v1alpha1.PodCheckRound) bool {
	return round.TokenOfState(&rd.RoundState) == round.TokenOf(s.wr.Annotations[RerunPodCheckAnnotation])
}

func podCheckTimeout(s *scope) time.Duration {
	if t := s.wr.Spec.PodNetworkCheck.Timeout; t != nil {
		return t.Duration
	}
	return DefaultPodCheckTimeout
}

// engine is the round engine for the check, and the spec of round id: the
// pods serve within half the timeout, and test and report within the rest;
// a round after a step tests the baseline's pairs.
func (r podCheck) engine(s *scope, id round.ID, token round.Token) (*podcheck.Engine, round.Spec[podcheck.Params]) {
	ns := r.opts.ProbeNamespace
	return &podcheck.Engine{Kind: podcheck.RoundKind, Client: r.Client, Reader: r.APIReader, Namespace: ns, Image: r.opts.ProbeImage,
			Removed: &r.removed},
		round.Spec[podcheck.Params]{ID: id, Token: token, Seed: podCheckStatus(s).Seed, Timeout: podCheckTimeout(s), Owner: round.Owner(s.wr),
			Params: func(ctx context.Context) (podcheck.Params, error) {
				svc, err := podcheck.ServiceAddr(ctx, r.APIReader, ns)
				return podcheck.Params{Service: svc, DNSName: podcheck.DNSName}, err
			}}
}

// step is the check's round step for rd, the round for the trigger in the
// status (nil when none ran): a new round runs on every Linux node, its pods
// and Service; a baseline's seed orders the pairs of every later round. The
// pods are paired once they serve, and their reports are judged against the
// baseline.
func (r podCheck) step(s *scope, rd *v1alpha1.PodCheckRound) roundStep[podcheck.Params, podcheck.Result] {
	return roundStep[podcheck.Params, podcheck.Result]{r: r.Reconciler, token: round.TokenOf(s.wr.Annotations[RerunPodCheckAnnotation]),
		what: podCheckLabel(r.trigger), starting: "pod network check", fix: podCheckRefusals,
		rerun:   rerunPodCheckCommand() + "; or set spec.podNetworkCheck.disabled",
		reports: "the pod check reports are deleted",
		engine: func(id round.ID, token round.Token) (*podcheck.Engine, round.Spec[podcheck.Params]) {
			return r.engine(s, id, token)
		},
		prepare: func(_ context.Context, spec *round.Spec[podcheck.Params]) error {
			if r.trigger == BaselineCheck {
				// Every later round tests the pairs the baseline tested.
				spec.Seed = string(spec.ID)
			}
			return nil
		},
		started: func(rs v1alpha1.RoundState, spec round.Spec[podcheck.Params]) Outcome {
			rd := &v1alpha1.PodCheckRound{RoundState: rs, Trigger: string(r.trigger)}
			st := podCheckStatus(s)
			if r.trigger == BaselineCheck {
				st.Baseline, st.Seed = rd, spec.Seed
			} else {
				st.Last = rd
			}
			s.note(corev1.EventTypeNormal, conditions.ReasonPodNetworkCheckStarted, string(r.trigger), "checking the pod network between %d Linux nodes (round %s)", rd.Nodes, spec.ID)
			return progressing(podCheckPoll, "%s: starting the pod network check pods on %d Linux nodes", podCheckLabel(r.trigger), rd.Nodes)
		},
		advanced: checkAdvanced(s, rd, r.unservedFix(), func() Outcome { return podCheckFailed(s, rd) }),
		waiting: func(p round.Progress) Outcome {
			if p.Stage == round.Pairing {
				return progressing(min(p.Wait, podCheckPoll), "%s: %d of %d pods serve", podCheckLabel(r.trigger), p.Reported, p.Expected)
			}
			return progressing(min(p.Wait, podCheckPoll), "%s: %d of %d pods reported", podCheckLabel(r.trigger), p.Reported, p.Expected)
		},
		judge: func(_ context.Context, res round.Results[podcheck.Params, podcheck.Result]) func() Outcome {
			return r.judge(s, rd, res)
		},
		refused: func(msg string) Outcome { return stop(ReasonPodNetworkCheckFailed, "%s", msg) },
	}
}

// podCheckRefusals are what the API server may refuse a check's round for.
const podCheckRefusals = "an admission policy or a quota refusing the check's DaemonSet, pods or Service, the probe image"

func podCheckLabel(trigger v1alpha1.StepName) string {
	if trigger == BaselineCheck {
		return "pod network check before the first change"
	}
	return "pod network check after step " + string(trigger)
}

// judge compares a complete round with the baseline; its verdict notes the
// outcome once the round is removed, and stops the migration on a round
// after a step that is worse.
func (r podCheck) judge(s *scope, rd *v1alpha1.PodCheckRound, res round.Results[podcheck.Params, podcheck.Result]) func() Outcome {
	trigger := v1alpha1.StepName(rd.Trigger)
	st := podCheckStatus(s)
	var baseline *v1alpha1.PodCheckRound
	if rd != st.Baseline {
		baseline = st.Baseline
	}
	podcheck.Judge(rd, res, baseline, rerunPodCheckCommand())
	worse := rd.Worse && trigger != BaselineCheck
	if !worse && trigger != BaselineCheck {
		st.Passed = append(slices.DeleteFunc(st.Passed, func(n v1alpha1.StepName) bool { return n == trigger }), trigger)
	}
	return func() Outcome {
		kind := corev1.EventTypeNormal
		if rd.FailingPairs > 0 || rd.Worse {
			kind = corev1.EventTypeWarning
		}
		s.note(kind, conditions.ReasonPodNetworkChecked, rd.Trigger, "%s", bounded(podCheckLabel(trigger)+": "+rd.Diagnosis))
		if worse {
			return podCheckFailed(s, rd)
		}
		return done()
	}
}

// checkAdvanced reads the progress of the check round rd: it notes the
// Linux nodes whose pod did not serve in time. A round in which no pod
// served proved nothing: it ends worse, with a diagnosis that ends with
// then, and is removed; its verdict is unserved's.
func checkAdvanced(s *scope, rd *v1alpha1.PodCheckRound, then string, unserved func() Outcome) func(context.Context, *podcheck.Engine, round.Progress) (Outcome, bool) {
	return func(ctx context.Context, e *podcheck.Engine, p round.Progress) (Outcome, bool) {
		if p.Unpaired != nil || p.NoneServed {
			rd.Missing = round.FirstListed(p.Unpaired)
		}
		if !p.NoneServed {
			return done(), false
		}
		completed := metav1.NewTime(s.now)
		rd.PlannedAt, rd.CompletedAt, rd.Worse = &completed, &completed, true
		rd.Diagnosis = round.Truncate(fmt.Sprintf("no check pod served within %s on any of the %d Linux nodes: %s",
			podCheckTimeout(s)/2, rd.Nodes, then), podcheck.MaxDiagnosis)
		if err := e.Cleanup(ctx); err != nil {
			return failed(err), true
		}
		return unserved(), true
	}
}

// unservedFix is what to look at when no check pod served, before the
// first change as after a step: the check proves nothing, so it stops the
// migration.
func (r podCheck) unservedFix() string {
	ns := r.opts.ProbeNamespace
	return fmt.Sprintf("look at the pods of DaemonSet %s/%s (kubectl -n %s describe daemonset %s: admission, quota, image), then %s; "+
		"or set spec.podNetworkCheck.disabled", ns, podcheck.Name, ns, podcheck.Name, rerunPodCheckCommand())
}

// rerunPodCheckCommand is how a person runs a failed pod network check
// again: the plugin's command, or the annotation it sets for those without
// the plugin (a GitOps repository, a script).
func rerunPodCheckCommand() string {
	return fmt.Sprintf("kubectl winready rerun podcheck (or kubectl annotate wr default %s=$(date +%%s) --overwrite)",
		RerunPodCheckAnnotation)
}

// podCheckFailed stops the migration with the diagnosis of a round worse
// than the baseline; in Revert mode the walk first reverts the step.
func podCheckFailed(s *scope, rd *v1alpha1.PodCheckRound) Outcome {
	msg := fmt.Sprintf("%s: the pod network is worse than before the first change, the migration stopped: %s. "+
		"To go back instead, set spec.direction: Rollback", podCheckLabel(v1alpha1.StepName(rd.Trigger)), rd.Diagnosis)
	if v1alpha1.StepName(rd.Trigger) == BaselineCheck {
		msg = fmt.Sprintf("%s could not run, nothing was changed: %s", podCheckLabel(BaselineCheck), rd.Diagnosis)
	}
	if step, due := podCheckRevertDue(s); due {
		return stop(conditions.ReasonRevertingStep, "reverting step %s: %s", step, msg).lookAgain(podCheckPoll)
	}
	if st := podCheckStatus(s); st.Reverted == v1alpha1.StepName(rd.Trigger) {
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
		!podCheckRerunSeen(s, last) {
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

// cancel removes a round still running, when the spec no longer wants it
// (disabled, paused, a dry run, rolled back).
func (r podCheck) cancel(ctx context.Context, s *scope) error {
	prev := s.before.Status.PodNetworkCheck
	running := func(rd *v1alpha1.PodCheckRound) bool { return rd != nil && rd.CompletedAt == nil }
	if prev == nil || !running(prev.Baseline) && !running(prev.Last) {
		return nil
	}
	rd := prev.Last
	if running(prev.Baseline) {
		rd = prev.Baseline
	}
	if stopped, err := r.step(s, rd).cancel(ctx, &rd.RoundState); err != nil || !stopped {
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
