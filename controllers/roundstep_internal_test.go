package controllers

import (
	"context"
	"errors"
	"regexp"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/conditions"
	"github.com/winready/winready/internal/phase"
)

// TestEveryRoundStopsAlikeOnARefusedStart starts the probe's round, the pod
// network check's (before the first change and after a step) and the
// canary's check against an API server that refuses their agents'
// DaemonSet: each start is retried before the permanentAfter-th pass that
// failed, and then stops with the one message, under the user's reason.
func TestEveryRoundStopsAlikeOnARefusedStart(t *testing.T) {
	b := newCheckBed(t, 1, v1alpha1.PodNetworkCheckSpec{})
	r := b.r
	r.Client = interceptor.NewClient(b.c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*appsv1.DaemonSet); ok {
				return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, obj.GetName(),
					errors.New("denied by policy no-agents: agents are not allowed in this cluster"))
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	users := []struct {
		name, reason, says string
		start              func(context.Context, *scope) Outcome
	}{
		{"the probe", conditions.ReasonNetworkProbeFailed,
			`^preflight failed, nothing was changed: the UDP 4789 probe could not be started in 3 attempts: .*`,
			func(ctx context.Context, s *scope) Outcome { return probeRound{r}.step(s, "", "").start(ctx, s) }},
		{"the baseline", ReasonPodNetworkCheckFailed, `^pod network check before the first change could not be started in 3 attempts: .*`,
			func(ctx context.Context, s *scope) Outcome {
				return podCheck{r, BaselineCheck}.step(s, nil).start(ctx, s)
			}},
		{"a check after a step", ReasonPodNetworkCheckFailed, `^pod network check after step BGP could not be started in 3 attempts: .*`,
			func(ctx context.Context, s *scope) Outcome {
				return podCheck{r, v1alpha1.StepBGP}.step(s, nil).start(ctx, s)
			}},
		{"the canary", ReasonPodNetworkCheckFailed, `^the canary's pod network check could not be started in 3 attempts: .*`,
			func(ctx context.Context, s *scope) Outcome {
				return rolloutCanary{}.step(walk{Reconciler: r}, s, phase.Input{}).start(ctx, s)
			}},
	}
	shape := regexp.MustCompile(`agents are not allowed in this cluster\. Fix what the API server says \(.+\), then kubectl winready rerun (preflight|podcheck) \(or kubectl annotate wr default .+`)
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			for failures := range permanentAfter {
				wr := &v1alpha1.WindowsReadiness{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.Name, Generation: 1}}
				wr.Status.Preflight = &v1alpha1.PreflightStatus{}
				wr.Status.Canary = &v1alpha1.CanaryStatus{Steps: []v1alpha1.StepName{v1alpha1.StepBGP}, State: v1alpha1.CanaryRolling,
					Nodes: []string{"node-a"}}
				s := &scope{wr: wr, before: wr.DeepCopy(), now: b.clock.Now(), failures: failures}
				o := u.start(context.Background(), s)
				if failures < permanentAfter-1 {
					if !permanent(o.Err) {
						t.Fatalf("refusal %d: %+v, want the refusal retried", failures+1, o)
					}
					continue
				}
				if o.Err != nil || o.Reason != u.reason {
					t.Fatalf("refusal %d: %+v, want a stop with %s", failures+1, o, u.reason)
				}
				t.Log(o.Message)
				if !regexp.MustCompile(u.says).MatchString(o.Message) || !shape.MatchString(o.Message) {
					t.Errorf("the stop says %q", o.Message)
				}
				if conditions.EffectOf(o.Reason) != conditions.Stalls {
					t.Errorf("%s does not stall", o.Reason)
				}

				// A manager that restarts counts its passes from zero: a
				// refusal while the object stops on this very refusal stops
				// at once, as it said; one while it stops for another reason
				// is tried again.
				for _, stalled := range []struct {
					message string
					stops   bool
				}{{o.Message, true}, {"preflight failed, nothing was changed: 1 nodes did not report", false}} {
					wr := wr.DeepCopy()
					wr.Status.Conditions = []metav1.Condition{{Type: conditions.Stalled, Status: metav1.ConditionTrue,
						Reason: o.Reason, Message: stalled.message}}
					s := &scope{wr: wr, before: wr.DeepCopy(), now: b.clock.Now()}
					again := u.start(context.Background(), s)
					switch {
					case stalled.stops && (again.Err != nil || again.Message != o.Message):
						t.Errorf("after a restart, stalled on the refusal: %+v, want the same stop at once", again)
					case !stalled.stops && !permanent(again.Err):
						t.Errorf("after a restart, stalled on %q: %+v, want the refusal retried", stalled.message, again)
					}
				}
			}
		})
	}
}
