package main

import (
	"fmt"
	"testing"

	"golang.org/x/tools/go/packages"
)

func load(t *testing.T, dir string) *graph {
	t.Helper()
	pkgs, err := packages.Load(&packages.Config{Dir: dir, Mode: loadMode}, ".")
	if err != nil || len(pkgs) != 1 || packages.PrintErrors(pkgs) > 0 {
		t.Fatalf("loading %s: %v", dir, err)
	}
	return graphOf(pkgs[0])
}

func TestTwoFilesThatUseEachOtherAreACycleWithTheNamesThatTieIt(t *testing.T) {
	cycles := load(t, "testdata/cycle").cycles()
	if len(cycles) != 1 || len(cycles[0]) != 2 {
		t.Fatalf("cycles = %v, want one of two edges", cycles)
	}
	want := map[string]string{"a.go -> b.go": "[B]", "b.go -> a.go": "[A Name]"}
	for _, e := range cycles[0] {
		key := e.from + " -> " + e.to
		if got := fmt.Sprint(e.names); got != want[key] {
			t.Errorf("%s uses %s, want %s", key, got, want[key])
		}
	}
}

func TestFilesThatDependOneWayHaveNoCycleAndStandOnFloors(t *testing.T) {
	g := load(t, "testdata/layered")
	if c := g.cycles(); len(c) != 0 {
		t.Fatalf("cycles = %v, want none", c)
	}
	floors := g.floors()
	if len(floors) != 2 || floors[0] != (floored{"high.go", 2}) || floors[1] != (floored{"low.go", 1}) {
		t.Errorf("floors = %v, want high.go on 2 above low.go on 1", floors)
	}
}
