package controllers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// summaryConditions are the conditions only conclude writes.
var summaryConditions = []string{"Ready", "Reconciling", "Stalled"}

// sources parses the package's code, tests left out.
func sources(t *testing.T) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return files
}

// calleeName is the name a call calls: set for s.set, Set for
// conditions.Set.
func calleeName(call *ast.CallExpr) string {
	switch fun := call.Fun.(type) {
	case *ast.SelectorExpr:
		return fun.Sel.Name
	case *ast.Ident:
		return fun.Name
	}
	return ""
}

// conditionsConst is the name of a conditions.X argument, "" otherwise.
func conditionsConst(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "conditions" {
			return sel.Sel.Name
		}
	}
	return ""
}

// TestOnlyConcludeWritesTheSummary fails when code outside conclude.go sets
// Ready, Reconciling or Stalled: conclude is their one writer, deciding from
// the catalogue.
func TestOnlyConcludeWritesTheSummary(t *testing.T) {
	for name, f := range sources(t) {
		if name == "conclude.go" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch callee := calleeName(call); callee {
			case "setSummary", "SetStatusCondition", "stall":
				t.Errorf("%s calls %s: only conclude writes Ready, Reconciling and Stalled", name, callee)
			case "set", "Set":
				for _, arg := range call.Args {
					if c := conditionsConst(arg); slices.Contains(summaryConditions, c) {
						t.Errorf("%s sets condition %s: only conclude does", name, c)
					}
				}
			}
			return true
		})
	}
}

// TestEachConditionHasOneWriter fails when a condition is set from more than
// one file: each says one fact, decided in one place (policy.go for
// RollbackAllowed, health.go for CalicoHealthy, preflight.go for
// PreflightPassed, ...), with one wording.
func TestEachConditionHasOneWriter(t *testing.T) {
	writers := map[string][]string{}
	for name, f := range sources(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || calleeName(call) != "set" || len(call.Args) == 0 {
				return true
			}
			if c := conditionsConst(call.Args[0]); c != "" && !slices.Contains(writers[c], name) {
				writers[c] = append(writers[c], name)
			}
			return true
		})
	}
	if len(writers) < 8 {
		t.Fatalf("only %d conditions written: the test no longer sees the calls", len(writers))
	}
	for c, files := range writers {
		if len(files) > 1 {
			slices.Sort(files)
			t.Errorf("condition %s is set in %s: one file decides it", c, strings.Join(files, ", "))
		}
	}
}

// TestReasonsComeFromTheCatalogue fails on an outcome or Event whose reason
// is spelled out where it is used: every reason is a constant of the
// conditions catalogue, which says what it means.
func TestReasonsComeFromTheCatalogue(t *testing.T) {
	checked := 0
	for name, f := range sources(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var reason ast.Expr
			switch calleeName(call) {
			case "stop":
				reason = call.Args[0]
			case "note":
				reason = call.Args[1]
			case "Eventf":
				if name != "conclude.go" {
					t.Errorf("%s records an Event itself: Events go through the scope to conclude", name)
				}
				return true
			default:
				return true
			}
			checked++
			switch r := reason.(type) {
			case *ast.BasicLit:
				t.Errorf("%s: reason %s is a literal, not a constant of the conditions catalogue", name, r.Value)
			case *ast.SelectorExpr:
				if pkg, _ := r.X.(*ast.Ident); pkg == nil || (pkg.Name != "conditions" && pkg.Name != "windows" && pkg.Name != "o") {
					t.Errorf("%s: reason %s.%s is not from the conditions catalogue", name, pkg, r.Sel.Name)
				}
			case *ast.Ident:
				if !strings.HasPrefix(r.Name, "Reason") && r.Name != "reason" {
					t.Errorf("%s: reason %s is not a constant of the conditions catalogue", name, r.Name)
				}
			}
			return true
		})
	}
	if checked < 20 {
		t.Fatalf("only %d reasons checked: the test no longer sees the calls", checked)
	}
}
