package conditions

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/winready/winready/api/v1alpha1"
)

// TestCatalogueIsComplete fails on a reason constant that the catalogue does
// not describe: it would be read as a stall.
func TestCatalogueIsComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "conditions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Reason") {
					continue
				}
				found++
				value, _ := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if _, ok := catalogue[value]; !ok {
					t.Errorf("%s (%q) is not in the catalogue", name.Name, value)
				}
			}
		}
	}
	if found != len(catalogue) {
		t.Errorf("%d reasons declared, %d in the catalogue", found, len(catalogue))
	}
	if EffectOf("SomethingNew") != Stalls {
		t.Error("an unknown reason does not stall")
	}
}

func TestEffects(t *testing.T) {
	for reason, want := range map[string]Effect{
		ReasonPaused: Holds, ReasonAwaitingApproval: Holds, ReasonCalicoDegraded: Waits,
		ReasonStepTimeout: Stalls, ReasonConflictingManager: Stalls, ReasonWindowsNodesPresent: Stalls, ReasonMigrated: Completes, ReasonDryRun: Rests, ReasonRefusedByAPIServer: Stalls,
	} {
		if got := EffectOf(reason); got != want {
			t.Errorf("%s: %v, want %v", reason, got, want)
		}
	}
}

func TestPhase(t *testing.T) {
	type cond struct {
		typ    string
		status metav1.ConditionStatus
		reason string
	}
	for _, tc := range []struct {
		dir   v1alpha1.Direction
		conds []cond
		want  v1alpha1.Phase
	}{
		{"", nil, v1alpha1.PhasePending},
		{"", []cond{{Reconciling, "True", ReasonProgressing}}, v1alpha1.PhasePreflight},
		{"", []cond{{Reconciling, "True", ReasonProgressing}, {PreflightPassed, "Unknown", ReasonProgressing}}, v1alpha1.PhasePreflight},
		{"", []cond{{Reconciling, "True", ReasonWaitingForCalico}, {PreflightPassed, "True", ReasonChecksPassed}}, v1alpha1.PhaseMigrating},
		{"", []cond{{Ready, "False", ReasonDryRun}, {Reconciling, "False", ReasonDryRun}}, v1alpha1.PhasePlanned},
		{"", []cond{{Reconciling, "True", ReasonAwaitingApproval}}, v1alpha1.PhaseAwaitingApproval},
		{"", []cond{{Reconciling, "True", ReasonPaused}}, v1alpha1.PhasePaused},
		{"", []cond{{Stalled, "True", ReasonStepTimeout}, {Reconciling, "True", ReasonPaused}}, v1alpha1.PhaseStalled},
		{"", []cond{{Ready, "True", ReasonMigrated}, {Reconciling, "False", ReasonMigrated}}, v1alpha1.PhaseReady},
		{v1alpha1.DirectionRollback, []cond{{Reconciling, "True", ReasonWaitingForCalico}}, v1alpha1.PhaseRollingBack},
		{v1alpha1.DirectionRollback, []cond{{Ready, "True", ReasonRolledBack}, {Reconciling, "False", ReasonRolledBack}}, v1alpha1.PhaseRolledBack},
		{v1alpha1.DirectionRollback, []cond{{Ready, "True", ReasonNothingToRollBack}, {Reconciling, "False", ReasonNothingToRollBack}}, v1alpha1.PhaseRolledBack},
		// The direction was just turned: the conditions still tell of the
		// other direction's end, which is not this one's.
		{v1alpha1.DirectionRollback, []cond{{Ready, "True", ReasonMigrated}, {Reconciling, "False", ReasonMigrated}, {PreflightPassed, "True", ReasonChecksPassed}}, v1alpha1.PhaseRollingBack},
		{v1alpha1.DirectionMigrate, []cond{{Ready, "True", ReasonRolledBack}, {Reconciling, "False", ReasonRolledBack}, {PreflightPassed, "True", ReasonChecksPassed}}, v1alpha1.PhaseMigrating},
	} {
		wr := &v1alpha1.WindowsReadiness{Spec: v1alpha1.WindowsReadinessSpec{Direction: tc.dir}}
		for _, c := range tc.conds {
			Set(wr, c.typ, c.status, c.reason, "")
		}
		if got := Phase(wr); got != tc.want {
			t.Errorf("%v %v: phase %s, want %s", tc.dir, tc.conds, got, tc.want)
		}
		if !slices.Contains(v1alpha1.Phases, tc.want) {
			t.Errorf("%s is missing from v1alpha1.Phases, which the metrics report", tc.want)
		}
	}
}
