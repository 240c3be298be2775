package main

import (
	"go/ast"
	"go/types"
	"maps"
	"path/filepath"
	"slices"
	"sort"

	"golang.org/x/tools/go/packages"
)

// edge is one file using names another file of the package defines.
type edge struct {
	from, to string
	names    []string
}

// graph is the files of one package and the names each uses of the others.
type graph struct {
	files []string
	names map[[2]string]map[string]bool
}

// graphOf reads which package-level names, methods and fields each file of
// p uses from its other files. Test files are not among p's files.
func graphOf(p *packages.Package) *graph {
	g := &graph{names: map[[2]string]map[string]bool{}}
	for _, f := range p.Syntax {
		from := filepath.Base(p.Fset.Position(f.Pos()).Filename)
		g.files = append(g.files, from)
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := p.TypesInfo.Uses[id]
			if obj == nil || obj.Pkg() != p.Types || !shared(obj, p.Types.Scope()) {
				return true
			}
			to := filepath.Base(p.Fset.Position(obj.Pos()).Filename)
			if to == from {
				return true
			}
			k := [2]string{from, to}
			if g.names[k] == nil {
				g.names[k] = map[string]bool{}
			}
			g.names[k][obj.Name()] = true
			return true
		})
	}
	sort.Strings(g.files)
	return g
}

// shared says whether obj is visible across files: declared at package
// level, or a method or field.
func shared(obj types.Object, pkg *types.Scope) bool {
	switch o := obj.(type) {
	case *types.Func:
		return o.Signature().Recv() != nil || o.Parent() == pkg
	case *types.Var:
		return o.IsField() || o.Parent() == pkg
	default:
		return obj.Parent() == pkg
	}
}

// uses are the files that file uses, sorted.
func (g *graph) uses(file string) []string {
	var out []string
	for k := range g.names {
		if k[0] == file {
			out = append(out, k[1])
		}
	}
	sort.Strings(out)
	return out
}

// cycles are the groups of files that use each other, each as its edges.
func (g *graph) cycles() [][]edge {
	var out [][]edge
	for _, comp := range g.components() {
		if len(comp) < 2 {
			continue
		}
		var es []edge
		for _, a := range comp {
			for _, b := range g.uses(a) {
				if slices.Contains(comp, b) {
					es = append(es, edge{from: a, to: b, names: slices.Sorted(maps.Keys(g.names[[2]string{a, b}]))})
				}
			}
		}
		out = append(out, es)
	}
	return out
}

// components are the strongly connected components of the graph (Tarjan).
func (g *graph) components() [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.uses(v) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			sort.Strings(comp)
			out = append(out, comp)
		}
	}
	for _, f := range g.files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	return out
}

// floored is a file and its floor: 1 for a file that uses no other, else
// one above the highest file it uses.
type floored struct {
	file  string
	floor int
}

// floors are the files from the top floor down. Files in a cycle share the
// floor of the cycle.
func (g *graph) floors() []floored {
	comps := g.components() // in reverse topological order: used before users
	floorOf := map[string]int{}
	for _, comp := range comps {
		f := 1
		for _, a := range comp {
			for _, b := range g.uses(a) {
				if !slices.Contains(comp, b) {
					f = max(f, floorOf[b]+1)
				}
			}
		}
		for _, a := range comp {
			floorOf[a] = f
		}
	}
	out := make([]floored, 0, len(g.files))
	for _, f := range g.files {
		out = append(out, floored{f, floorOf[f]})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].floor > out[j].floor })
	return out
}

// loadMode is what graphOf needs of a package: its files, syntax and types.
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo
