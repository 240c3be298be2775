package phase

import (
	"strings"
	"testing"

	operatorv1 "github.com/tigera/operator/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/winready/winready/api/v1alpha1"
	"github.com/winready/winready/internal/calico"
)

// withStrategy is an Installation whose calico-node rolls out with maxUnavailable v (none when nil).
func withStrategy(typ appsv1.DaemonSetUpdateStrategyType, v *intstr.IntOrString) *calico.Cluster {
	return &calico.Cluster{Installation: installation(func(inst *operatorv1.Installation) {
		inst.Spec.NodeUpdateStrategy.Type = typ
		if v != nil {
			inst.Spec.NodeUpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: v}
		}
	})}
}

func speedLines(changes []calico.Change) []string {
	var lines []string
	for _, c := range changes {
		lines = append(lines, c.Field()+": "+c.Before()+" -> "+c.After())
	}
	return lines
}

func TestRolloutSpeedRecordsFasterAndRestores(t *testing.T) {
	one, ten, quarter := intstr.FromInt32(1), intstr.FromInt32(10), intstr.FromString("25%")
	cases := []struct {
		name              string
		cluster           *calico.Cluster
		want              *intstr.IntOrString
		recorded          v1alpha1.OriginalValue
		faster, raised    []string
		restoreFromRaised []string
	}{{
		name: "a count", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &one), want: &ten,
		recorded:          v1alpha1.OriginalValue{Present: true, Value: "1"},
		faster:            []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: 1 -> 10"},
		restoreFromRaised: []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: 10 -> 1"},
	}, {
		name: "a percentage over a count", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &one), want: &quarter,
		recorded:          v1alpha1.OriginalValue{Present: true, Value: "1"},
		faster:            []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: 1 -> 25%"},
		restoreFromRaised: []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: 25% -> 1"},
	}, {
		name: "no rolling update yet", cluster: withStrategy("", nil), want: &ten,
		recorded:          v1alpha1.OriginalValue{},
		faster:            []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: <absent> -> 10"},
		restoreFromRaised: []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: 10 -> <absent>"},
	}, {
		name: "already as wanted", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &ten), want: &ten,
		recorded: v1alpha1.OriginalValue{Present: true, Value: "10"},
	}, {
		name: "not asked for", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &one),
		recorded: v1alpha1.OriginalValue{Present: true, Value: "1"},
	}, {
		name: "calico-node on OnDelete", cluster: withStrategy(appsv1.OnDeleteDaemonSetStrategyType, nil), want: &ten,
		recorded: v1alpha1.OriginalValue{},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := &v1alpha1.Originals{}
			RecordMaxUnavailable(c.cluster, o)
			if *o.NodeMaxUnavailable != c.recorded {
				t.Fatalf("recorded %+v, want %+v", *o.NodeMaxUnavailable, c.recorded)
			}
			s := RolloutSpeed{Want: c.want}
			in := Input{Cluster: c.cluster, Originals: o, Direction: v1alpha1.DirectionMigrate}
			up := s.Faster(in)
			if got := speedLines(up); strings.Join(got, "|") != strings.Join(c.faster, "|") {
				t.Fatalf("faster: %q, want %q", got, c.faster)
			}
			if got := s.Restore(in, true); len(got) != 0 {
				t.Fatalf("restore before any change: %q", speedLines(got))
			}
			if len(up) == 0 {
				return
			}
			raised := withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, c.want)
			in.Cluster = raised
			if got := speedLines(s.Restore(in, true)); strings.Join(got, "|") != strings.Join(c.restoreFromRaised, "|") {
				t.Fatalf("restore: %q, want %q", got, c.restoreFromRaised)
			}
			if got := s.Restore(in, false); len(got) != 0 {
				t.Fatalf("restore of a value someone else set: %q", speedLines(got))
			}
			if got := (RolloutSpeed{}).Restore(in, true); len(got) == 0 {
				t.Fatal("a raise is put back after spec.rollout.maxUnavailable was removed")
			}
		})
	}
}

func TestRolloutSpeedLeavesSomeoneElsesValue(t *testing.T) {
	one, three, ten := intstr.FromInt32(1), intstr.FromInt32(3), intstr.FromInt32(10)
	o := &v1alpha1.Originals{}
	RecordMaxUnavailable(withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &one), o)
	in := Input{Cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &three), Originals: o}
	if got := (RolloutSpeed{Want: &ten}).Faster(in); len(got) != 0 {
		t.Fatalf("a value set since the record was replaced: %q", speedLines(got))
	}
}

func TestRolloutSpeedNeedsARecord(t *testing.T) {
	ten := intstr.FromInt32(10)
	in := Input{Cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, nil), Originals: &v1alpha1.Originals{}}
	if got := (RolloutSpeed{Want: &ten}).Faster(in); len(got) != 0 {
		t.Fatalf("a record without the original maxUnavailable has nothing to put back, yet: %q", speedLines(got))
	}
}

func TestRolloutSpeedBound(t *testing.T) {
	c := &calico.Cluster{Node: &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 10}}}
	for _, tc := range []struct {
		want intstr.IntOrString
		err  string
	}{
		{intstr.FromInt32(3), ""},
		{intstr.FromInt32(4), "spec.rollout.maxUnavailable 4 is more than a quarter of the 10 nodes calico-node runs on: at most 3"},
		{intstr.FromString("25%"), ""},
	} {
		err := RolloutSpeed{Want: &tc.want}.Check(Input{Cluster: c})
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.want.String(), err, tc.err)
		}
	}
	one := intstr.FromInt32(1)
	small := &calico.Cluster{Node: &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2}}}
	if err := (RolloutSpeed{Want: &one}).Check(Input{Cluster: small}); err != nil {
		t.Errorf("one node at a time is always allowed: %v", err)
	}
}

func TestNoWiderIsTheAdmissionPolicysRule(t *testing.T) {
	n := func(v int64) calico.Value { return calico.Of(v) }
	p := func(v string) calico.Value { return calico.Of(v) }
	absent := calico.Value{}
	cases := []struct {
		v, than calico.Value
		want    bool
	}{
		{absent, p("10%"), true},
		{n(1), p("10%"), true},
		{n(1), absent, true},
		{n(2), n(3), true},
		{n(3), n(3), true},
		{n(4), n(3), false},
		{n(2), p("10%"), false},
		{p("5%"), p("10%"), true},
		{p("50%"), p("10%"), false},
		{p("5%"), n(3), false},
		{p("5%"), absent, false},
		{p("x%"), p("10%"), false},
	}
	for _, c := range cases {
		if got := NoWider(c.v, c.than); got != c.want {
			t.Errorf("NoWider(%s, %s) = %v, want %v", c.v, c.than, got, c.want)
		}
	}
}

func TestRestoreLeavesAnOriginalWiderThanTheSpecsPace(t *testing.T) {
	ten := intstr.FromString("10%")
	in := Input{Cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &ten),
		Originals: &v1alpha1.Originals{NodeMaxUnavailable: &v1alpha1.OriginalValue{Present: true, Value: "50%"}}}
	if got := (RolloutSpeed{Want: &ten}).Restore(in, true); len(got) != 0 {
		t.Errorf("an original of 50%% after 10%%: %v, want no change", speedLines(got))
	}
	in.Originals.NodeMaxUnavailable.Value = "5%"
	if got := speedLines((RolloutSpeed{Want: &ten}).Restore(in, true)); len(got) != 1 {
		t.Errorf("an original of 5%% after 10%%: %v, want it put back", got)
	}
}

func TestRolloutSpeedCanary(t *testing.T) {
	one, three, ten, pct := intstr.FromInt32(1), intstr.FromInt32(3), intstr.FromInt32(10), intstr.FromString("10%")
	recorded := func(v *intstr.IntOrString) *v1alpha1.Originals {
		o := &v1alpha1.Originals{NodeMaxUnavailable: &v1alpha1.OriginalValue{}}
		if v != nil {
			o.NodeMaxUnavailable = &v1alpha1.OriginalValue{Present: true, Value: v.String()}
		}
		return o
	}
	cases := []struct {
		name      string
		cluster   *calico.Cluster
		want      *intstr.IntOrString
		originals *v1alpha1.Originals
		ok        bool
		canary    []string
		after     []string // from the canary's pace
	}{{
		name: "a wider original is slowed to one node, then raised to the spec's", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &three),
		want: &ten, originals: recorded(&three), ok: true,
		canary: []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: 3 -> 1"},
		after:  []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: 1 -> 10"},
	}, {
		name: "the operator's default is already one node", cluster: withStrategy("", nil), want: &pct, originals: recorded(nil), ok: true,
		after: []string{"spec.nodeUpdateStrategy.rollingUpdate.maxUnavailable: <absent> -> 10%"},
	}, {
		name: "one node and no spec pace: nothing to write either way", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &one),
		originals: recorded(&one), ok: true,
	}, {
		name: "a wider Installation pace and no spec pace: nothing may raise it again", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &three),
		originals: recorded(&three),
	}, {
		name: "OnDelete rolls nothing by itself", cluster: withStrategy(appsv1.OnDeleteDaemonSetStrategyType, nil), want: &ten, originals: recorded(nil),
	}, {
		name: "someone else's pace stays", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &pct), want: &ten, originals: recorded(&three),
	}, {
		name: "no original recorded yet", cluster: withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &three), want: &ten,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := RolloutSpeed{Want: c.want}
			in := Input{Cluster: c.cluster, Originals: c.originals}
			changes, ok := s.Canary(in)
			if ok != c.ok || strings.Join(speedLines(changes), "\n") != strings.Join(c.canary, "\n") {
				t.Fatalf("Canary: %v %v, want %v %v", speedLines(changes), ok, c.canary, c.ok)
			}
			if !ok {
				return
			}
			slowed := c.cluster
			if len(changes) > 0 {
				slowed = withStrategy(appsv1.RollingUpdateDaemonSetStrategyType, &one)
			}
			if got := speedLines(s.AfterCanary(Input{Cluster: slowed, Originals: c.originals})); strings.Join(got, "\n") != strings.Join(c.after, "\n") {
				t.Fatalf("AfterCanary: %v, want %v", got, c.after)
			}
		})
	}
}
