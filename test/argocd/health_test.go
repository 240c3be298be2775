// Package argocd tests config/argocd/health.lua, the Argo CD health check of
// WindowsReadiness, with gopher-lua, the interpreter Argo CD runs it with.
package argocd

import (
	"encoding/json"
	"os"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// toLua converts decoded JSON into Lua values as Argo CD does.
func toLua(ls *lua.LState, v any) lua.LValue {
	switch t := v.(type) {
	case map[string]any:
		tbl := ls.NewTable()
		for k, val := range t {
			tbl.RawSetString(k, toLua(ls, val))
		}
		return tbl
	case []any:
		tbl := ls.NewTable()
		for _, val := range t {
			tbl.Append(toLua(ls, val))
		}
		return tbl
	case string:
		return lua.LString(t)
	case int:
		return lua.LNumber(t)
	case int64:
		return lua.LNumber(t)
	case float64:
		// encoding/json decodes every number as float64, as Argo CD's
		// objects arrive.
		return lua.LNumber(t)
	case bool:
		return lua.LBool(t)
	}
	return lua.LNil
}

func health(t *testing.T, obj map[string]any) (string, string) {
	t.Helper()
	script, err := os.ReadFile("../../config/argocd/health.lua")
	if err != nil {
		t.Fatal(err)
	}
	ls := lua.NewState()
	defer ls.Close()
	ls.SetGlobal("obj", toLua(ls, obj))
	if err := ls.DoString(string(script)); err != nil {
		t.Fatal(err)
	}
	hs, ok := ls.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the script returned %v", ls.Get(-1))
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

func wr(generation, observed int, conds ...map[string]any) map[string]any {
	list := make([]any, len(conds))
	for i, c := range conds {
		list[i] = c
	}
	return map[string]any{
		"metadata": map[string]any{"name": "default", "generation": generation},
		"status":   map[string]any{"observedGeneration": observed, "conditions": list},
	}
}

func cond(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message}
}

// TestNumbersArriveAsArgoCDSendsThem: generations decoded from JSON are
// float64; a harness that dropped them would read every object as generation
// 0 and pass the generation checks by accident.
func TestNumbersArriveAsArgoCDSendsThem(t *testing.T) {
	var obj map[string]any
	if err := json.Unmarshal([]byte(`{"metadata":{"generation":3},"status":{"observedGeneration":2,
		"conditions":[{"type":"Ready","status":"True","reason":"Migrated","message":"ready"}]}}`), &obj); err != nil {
		t.Fatal(err)
	}
	if status, _ := health(t, obj); status != "Progressing" {
		t.Errorf("Ready for generation 2 of 3 reads %s, want Progressing", status)
	}
}

func TestHealth(t *testing.T) {
	tests := []struct {
		name        string
		obj         map[string]any
		status, msg string
	}{
		{"new", map[string]any{"metadata": map[string]any{"generation": 1}}, "Progressing", "waiting for the operator"},
		{"migrating", wr(1, 0,
			cond("Ready", "False", "WaitingForCalico", "step 3/6 (BGP): waiting for calico-node rollout"),
			cond("Reconciling", "True", "WaitingForCalico", "step 3/6 (BGP): waiting for calico-node rollout"),
			cond("Stalled", "False", "WaitingForCalico", "")),
			"Progressing", "step 3/6 (BGP): waiting for calico-node rollout"},
		{"paused", wr(1, 0,
			cond("Reconciling", "True", "Paused", "step 1/6 (StrictAffinity): paused before the next change")),
			"Suspended", "step 1/6 (StrictAffinity): paused before the next change"},
		{"ready", wr(2, 2,
			cond("Ready", "True", "Migrated", "the cluster is ready for Windows nodes"),
			cond("Reconciling", "False", "Migrated", ""), cond("Stalled", "False", "Migrated", "")),
			"Healthy", "the cluster is ready for Windows nodes"},
		{"ready for an older generation", wr(3, 2,
			cond("Ready", "True", "Migrated", "the cluster is ready for Windows nodes")),
			"Progressing", "waiting for the operator"},
		{"awaiting approval", wr(1, 0,
			cond("Reconciling", "True", "AwaitingApproval", "waiting for approval (BGP off): add BGP to spec.approvedSteps to go on")),
			"Suspended", "waiting for approval (BGP off): add BGP to spec.approvedSteps to go on"},
		{"a finished dry run", wr(1, 1,
			cond("Ready", "False", "DryRun", "dry run: 7 changes planned in status.plan, none made"),
			cond("Reconciling", "False", "DryRun", "dry run: 7 changes planned in status.plan, none made"),
			cond("Stalled", "False", "DryRun", "")),
			"Healthy", "dry run: 7 changes planned in status.plan, none made"},
		{"a dry run of an older generation", wr(2, 1,
			cond("Ready", "False", "DryRun", "dry run: 7 changes planned in status.plan, none made")),
			"Progressing", "waiting for the operator"},
		{"stalled", wr(1, 1,
			cond("Ready", "False", "PreflightFailed", "preflight failed"),
			cond("Stalled", "True", "PreflightFailed", "preflight failed, nothing was changed: IPIPPools: ...")),
			"Degraded", "preflight failed, nothing was changed: IPIPPools: ..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := health(t, tc.obj)
			if status != tc.status || msg != tc.msg {
				t.Fatalf("got %s %q, want %s %q", status, msg, tc.status, tc.msg)
			}
		})
	}
}
