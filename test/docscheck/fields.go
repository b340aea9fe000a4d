package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// catalogueFile holds the dcgm receiver's built-in fields: the elements of
// the composite literal of var Catalogue.
const catalogueFile = "receiver/dcgmreceiver/internal/model/fields.go"

// catalogueLen counts the elements of var Catalogue in catalogueFile (the
// package is internal to the receiver, so it is parsed, not imported).
func catalogueLen(root string) (int, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, filepath.FromSlash(catalogueFile)), nil, 0)
	if err != nil {
		return 0, fmt.Errorf("the dcgm catalogue: %w", err)
	}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if name.Name != "Catalogue" || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					return 0, fmt.Errorf("%s: var Catalogue is not a composite literal", catalogueFile)
				}
				return len(lit.Elts), nil
			}
		}
	}
	return 0, fmt.Errorf("%s: no var Catalogue", catalogueFile)
}

// fieldCount finds the docs' statements of how many fields are built in:
// "55 built-in fields", "the built-in 55 fields", "the built-in set has 55
// fields", case-insensitive, across a line break.
var fieldCount = regexp.MustCompile(`(?i)\b(\d+)\s+built-in\s+(?:dcgm\s+)?fields\b|\bbuilt-in\s+(\d+)\s+(?:dcgm\s+)?fields\b|\bbuilt-in\s+set\s+(?:has|of)\s+(\d+)\s+fields\b`)

// checkFieldCounts reports every count of built-in fields that is not n.
// A file's text is searched as one, its lines joined by blanks, so that a
// phrase wrapped over two lines is found too; it is reported at the line
// the number is on.
func checkFieldCounts(docs []doc, n int) []Problem {
	var problems []Problem
	for _, d := range docs {
		var b strings.Builder
		starts := make([]int, len(d.lines))
		for i, l := range d.lines {
			starts[i] = b.Len()
			b.WriteString(strings.TrimLeft(l.text, " \t#>"))
			b.WriteByte(' ')
		}
		text := b.String()
		for _, m := range fieldCount.FindAllStringSubmatchIndex(text, -1) {
			for g := 1; g <= 3; g++ {
				if m[2*g] < 0 {
					continue
				}
				said, err := strconv.Atoi(text[m[2*g]:m[2*g+1]])
				if err != nil || said == n {
					break
				}
				i := sort.Search(len(starts), func(i int) bool { return starts[i] > m[2*g] }) - 1
				problems = append(problems, Problem{d.path, d.lines[i].n, fmt.Sprintf(
					"says %d built-in fields; the dcgm receiver has %d (len(Catalogue) in %s)", said, n, catalogueFile)})
				break
			}
		}
	}
	return problems
}
