// Command filegraph checks that the files of a Go package depend one way: a
// file that uses a name another file of the package defines (a function, a
// type, a method, a field, a constant or a variable) stands above it, and no
// two files stand above each other, directly or through others. A package
// whose vocabulary sits at the bottom and whose procedures sit on top reads
// from the top down; a cycle of files is a part that belongs elsewhere.
//
//	go run ./hack/filegraph ./controllers ./internal/phase
//
// prints each cycle of each package with the names that tie it and exits 1;
// with -v it prints every file's floor and what it uses.
package main

import (
	"flag"
	"fmt"
	"os"

	"golang.org/x/tools/go/packages"
)

func main() {
	verbose := flag.Bool("v", false, "print every file's floor and the files it uses")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: filegraph [-v] PACKAGE...")
		os.Exit(2)
	}
	pkgs, err := packages.Load(&packages.Config{Mode: loadMode}, flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if packages.PrintErrors(pkgs) > 0 {
		fmt.Fprintln(os.Stderr, "want packages that type-check")
		os.Exit(2)
	}
	failed := false
	for _, p := range pkgs {
		g := graphOf(p)
		if *verbose {
			fmt.Println(p.PkgPath)
			for _, f := range g.floors() {
				fmt.Printf("  floor %2d  %s  uses %v\n", f.floor, f.file, g.uses(f.file))
			}
		}
		for _, c := range g.cycles() {
			failed = true
			fmt.Printf("%s: files that use each other:\n", p.PkgPath)
			for _, e := range c {
				fmt.Printf("  %s -> %s: %v\n", e.from, e.to, e.names)
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}
