// Package prometheus tests config/prometheus/prometheusrule.yaml with
// Prometheus's own PromQL engine, as `promtool test rules` would, so that CI
// needs no binary: each alert is evaluated every minute over loaded series,
// and fires once its expression has held for its `for`.
package prometheus

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"go.yaml.in/yaml/v3"
)

// prometheusRule is the part of the PrometheusRule object Prometheus reads.
type prometheusRule struct {
	Spec rulefmt.RuleGroups `yaml:"spec"`
}

func rules(t *testing.T) map[string]rulefmt.Rule {
	t.Helper()
	data, err := os.ReadFile("../../config/prometheus/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	out := map[string]rulefmt.Rule{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if _, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr); err != nil {
				t.Errorf("rule %s%s: %v", r.Alert, r.Record, err)
			}
			out[r.Alert+r.Record] = r
		}
	}
	return out
}

// firing is whether the rule's alert fires at minute at: its expression
// returned something at every minute of the `for` before it.
func firing(t *testing.T, r rulefmt.Rule, series string, at int) bool {
	t.Helper()
	loaded := promqltest.LoadedStorage(t, "load 1m\n"+series)
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	hold := time.Duration(r.For) / time.Minute
	for m := at - int(hold); m <= at; m++ {
		if m < 0 || len(evaluate(t, engine, loaded, r.Expr, m)) == 0 {
			return false
		}
	}
	return true
}

func evaluate(t *testing.T, engine *promql.Engine, storage storage.Queryable, expr string, minute int) promql.Vector {
	t.Helper()
	q, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, time.Unix(int64(minute*60), 0))
	if err != nil {
		t.Fatal(err)
	}
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAlerts(t *testing.T) {
	all := rules(t)
	for _, tc := range []struct {
		alert, name, series string
		at                  int
		fires               bool
	}{
		{"WinreadyStalled", "stalled for six minutes", `winready_blocked{reason="PreflightFailed"} 0x7 1x12`, 14, true},
		{"WinreadyStalled", "stalled for two minutes", `winready_blocked{reason="PreflightFailed"} 0x7 1x12`, 10, false},
		{"WinreadyStalled", "not stalled", `winready_blocked{reason="PreflightFailed"} 0x20`, 14, false},

		{"WinreadyNoProgress", "migrating, no progress for over half the deadline", `winready_last_progress_timestamp_seconds 60x40
winready_progress_deadline_seconds 1800x40
winready_phase{phase="Migrating"} 1x40`, 22, true},
		{"WinreadyNoProgress", "migrating, no progress for over half the deadline, for under five minutes", `winready_last_progress_timestamp_seconds 60x40
winready_progress_deadline_seconds 1800x40
winready_phase{phase="Migrating"} 1x40`, 18, false},
		{"WinreadyNoProgress", "migrating, progress within half the deadline", `winready_last_progress_timestamp_seconds 60x40
winready_progress_deadline_seconds 1800x40
winready_phase{phase="Migrating"} 1x40`, 15, false},
		{"WinreadyNoProgress", "Ready: nothing left to progress", `winready_last_progress_timestamp_seconds 60x40
winready_progress_deadline_seconds 1800x40
winready_phase{phase="Migrating"} 0x40
winready_phase{phase="Ready"} 1x40`, 30, false},

		{"WinreadyAwaitingApproval", "awaiting approval for over an hour", `winready_phase{phase="AwaitingApproval"} 1x90`, 61, true},
		{"WinreadyAwaitingApproval", "awaiting approval for under an hour", `winready_phase{phase="AwaitingApproval"} 1x90`, 59, false},

		{"WinreadyWindowsNodeOverdue", "a node overdue", `winready_windows_nodes{state="Overdue"} 0x5 2x5`, 8, true},
		{"WinreadyWindowsNodeOverdue", "none overdue", `winready_windows_nodes{state="Overdue"} 0x5 2x5
winready_windows_nodes{state="Joining"} 3x10`, 3, false},

		{"WinreadyNoLeader", "no replica leads for six minutes", `leader_election_master_status{name="winready.winready.io",pod="a"} 1x3 0x10
leader_election_master_status{name="winready.winready.io",pod="b"} 0x13`, 10, true},
		{"WinreadyNoLeader", "no replica leads for two minutes", `leader_election_master_status{name="winready.winready.io",pod="a"} 1x3 0x10`, 6, false},
		{"WinreadyNoLeader", "one replica leads", `leader_election_master_status{name="winready.winready.io",pod="a"} 0x13
leader_election_master_status{name="winready.winready.io",pod="b"} 1x13`, 10, false},

		{"WinreadyCalicoNodeIgnored", "held by someone else for eleven minutes", `winready_calico_node_ignored{set_by="other"} 1x20
winready_calico_node_ignored{set_by="winready"} 0x20`, 11, true},
		{"WinreadyCalicoNodeIgnored", "winready's hold of a few minutes", `winready_calico_node_ignored{set_by="winready"} 0x2 1x3 0x10`, 12, false},
		{"WinreadyCalicoNodeIgnored", "not ignored", `winready_calico_node_ignored{set_by="other"} 0x20`, 15, false},
	} {
		t.Run(tc.alert+"/"+tc.name, func(t *testing.T) {
			r, ok := all[tc.alert]
			if !ok {
				t.Fatalf("no alert %s", tc.alert)
			}
			if got := firing(t, r, tc.series, tc.at); got != tc.fires {
				t.Errorf("at minute %d firing = %t, want %t", tc.at, got, tc.fires)
			}
		})
	}
}

func TestFleetRecordingRuleKeepsEachPhase(t *testing.T) {
	r, ok := rules(t)["winready:phase:max"]
	if !ok {
		t.Fatal("no recording rule winready:phase:max")
	}
	loaded := promqltest.LoadedStorage(t, `load 1m
winready_phase{phase="Ready",pod="a"} 1x5
winready_phase{phase="Ready",pod="b"} 0x5
winready_phase{phase="Migrating",pod="a"} 0x5`)
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	got := map[string]float64{}
	for _, s := range evaluate(t, engine, loaded, r.Expr, 3) {
		got[s.Metric.Get(model.MetricNameLabel)+s.Metric.Get("phase")] = s.F
	}
	if len(got) != 2 || got["Ready"] != 1 || got["Migrating"] != 0 {
		t.Errorf("winready:phase:max = %v, want Ready 1 and Migrating 0 whatever the replica", got)
	}
}
