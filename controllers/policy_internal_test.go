package controllers

import (
	"testing"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
	"github.com/winready/winready/internal/conditions"
)

// TestPolicy is the table of the decisions policy.go shares: whether the
// next change of a step may be made now, migrating or rolling back.
func TestPolicy(t *testing.T) {
	worse := func(trigger string) *v1alpha1.PodCheckRound {
		return &v1alpha1.PodCheckRound{Trigger: trigger, Worse: true}
	}
	failedCanary := func(reverted bool) *v1alpha1.CanaryStatus {
		return &v1alpha1.CanaryStatus{Steps: []v1alpha1.StepName{v1alpha1.StepBGP, v1alpha1.StepServicesEndpoint},
			Direction: v1alpha1.DirectionMigrate, State: v1alpha1.CanaryFailed, Reverted: reverted, Round: worse(CanaryTrigger)}
	}
	for _, tc := range []struct {
		name   string
		set    func(wr *v1alpha1.WindowsReadiness)
		step   v1alpha1.StepName
		dir    v1alpha1.Direction
		reason string // "" when the change may be made
	}{
		{"nothing holds a change", nil, v1alpha1.StepBGP, v1alpha1.DirectionMigrate, ""},
		{"paused holds a migration", func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true },
			v1alpha1.StepStrictAffinity, v1alpha1.DirectionMigrate, conditions.ReasonPaused},
		{"paused holds a rollback", func(wr *v1alpha1.WindowsReadiness) { wr.Spec.Paused = true },
			v1alpha1.StepBGP, v1alpha1.DirectionRollback, conditions.ReasonPaused},
		{"a disruptive step waits for approval", func(wr *v1alpha1.WindowsReadiness) { wr.Spec.RequireApproval = true },
			v1alpha1.StepBGP, v1alpha1.DirectionMigrate, conditions.ReasonAwaitingApproval},
		{"an approved one goes on", func(wr *v1alpha1.WindowsReadiness) {
			wr.Spec.RequireApproval, wr.Spec.ApprovedSteps = true, []v1alpha1.StepName{v1alpha1.StepBGP}
		}, v1alpha1.StepBGP, v1alpha1.DirectionMigrate, ""},
		{"a step that moves no traffic needs no approval", func(wr *v1alpha1.WindowsReadiness) { wr.Spec.RequireApproval = true },
			v1alpha1.StepServiceCIDRs, v1alpha1.DirectionMigrate, ""},
		{"the step after which the pod network got worse is not written again", func(wr *v1alpha1.WindowsReadiness) {
			wr.Status.PodNetworkCheck = &v1alpha1.PodNetworkCheckStatus{Last: worse(string(v1alpha1.StepBGP))}
		}, v1alpha1.StepBGP, v1alpha1.DirectionMigrate, ReasonPodNetworkCheckFailed},
		{"another step is", func(wr *v1alpha1.WindowsReadiness) {
			wr.Status.PodNetworkCheck = &v1alpha1.PodNetworkCheckStatus{Last: worse(string(v1alpha1.StepBGP))}
		}, v1alpha1.StepServiceCIDRs, v1alpha1.DirectionMigrate, ""},
		{"a rerun asked for after the worse round lets it be written again", func(wr *v1alpha1.WindowsReadiness) {
			wr.Status.PodNetworkCheck = &v1alpha1.PodNetworkCheckStatus{Last: worse(string(v1alpha1.StepBGP))}
			wr.Annotations = map[string]string{RerunPodCheckAnnotation: "1"}
		}, v1alpha1.StepBGP, v1alpha1.DirectionMigrate, ""},
		{"a failed canary's reverted steps are not written again", func(wr *v1alpha1.WindowsReadiness) {
			wr.Status.Canary = failedCanary(true)
		}, v1alpha1.StepServicesEndpoint, v1alpha1.DirectionMigrate, conditions.ReasonCanaryFailed},
		{"nor before they are reverted: the revert comes first", func(wr *v1alpha1.WindowsReadiness) {
			wr.Status.Canary = failedCanary(false)
		}, v1alpha1.StepBGP, v1alpha1.DirectionMigrate, ""},
		{"a rerun lets a failed canary's steps be written again, with a new canary", func(wr *v1alpha1.WindowsReadiness) {
			wr.Status.Canary = failedCanary(true)
			wr.Annotations = map[string]string{RerunPodCheckAnnotation: "1"}
		}, v1alpha1.StepBGP, v1alpha1.DirectionMigrate, ""},
		{"a failed canary holds no rollback", func(wr *v1alpha1.WindowsReadiness) { wr.Status.Canary = failedCanary(true) },
			v1alpha1.StepBGP, v1alpha1.DirectionRollback, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := passOver()
			if tc.set != nil {
				tc.set(s.wr)
			}
			blocked := migrationBlocked
			if tc.dir == v1alpha1.DirectionRollback {
				blocked = rollbackBlocked
			}
			o := blocked(s, tc.step)
			if o.Done() != (tc.reason == "") || o.Reason != tc.reason {
				t.Fatalf("%s %s: outcome %q (%s), want %q", tc.dir, tc.step, o.Reason, o.Message, tc.reason)
			}
		})
	}

	t.Run("Calico Degraded by nothing winready changed holds either direction", func(t *testing.T) {
		s := passOver()
		s.calico.degraded = &calico.Health{Name: "calico", Message: "calico-node is not ready"}
		for dir, blocked := range map[v1alpha1.Direction]mayChange{v1alpha1.DirectionMigrate: migrationBlocked, v1alpha1.DirectionRollback: rollbackBlocked} {
			if o := blocked(s, v1alpha1.StepBGP); o.Done() || o.Reason != conditions.ReasonCalicoDegraded {
				t.Errorf("%s: %q %s", dir, o.Reason, o.Message)
			}
		}
	})
}
