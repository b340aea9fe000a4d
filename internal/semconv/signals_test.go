package semconv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the repository root, seen from this package's directory.
const moduleRoot = "../.."

const semconvImportPath = "github.com/otelcol-gpu/otelcol-gpu/internal/semconv"

// registryEntries reads ruleSignals from signals.go: the identifier of each
// entry's name constant, in the order of the slice.
func registryEntries(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "signals.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var idents []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "ruleSignals" {
			return true
		}
		for _, elt := range vs.Values[0].(*ast.CompositeLit).Elts {
			entry := elt.(*ast.CompositeLit)
			id, ok := entry.Elts[0].(*ast.Ident)
			if !ok {
				t.Fatalf("ruleSignals entry %d names its signal with %T, not a constant of this package", len(idents), entry.Elts[0])
			}
			idents = append(idents, id.Name)
		}
		return false
	})
	if len(idents) != len(ruleSignals) {
		t.Fatalf("read %d ruleSignals entries from signals.go, the package has %d", len(idents), len(ruleSignals))
	}
	return idents
}

const modulePath = "github.com/otelcol-gpu/otelcol-gpu"

// semconvUses returns the identifiers of this package that the non-test Go
// files of a component select: those under dir (its internal packages
// included) and those of the module's packages it imports, transitively. A
// component may write a name through a shared writer (the stepspan
// processor writes a step's health with internal/steprecord).
func semconvUses(t *testing.T, dir string) map[string]bool {
	t.Helper()
	uses := map[string]bool{}
	seen := map[string]bool{}
	var queue []string // directories of imported packages
	read := func(path string) {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatalf("parsing %s: %v", path, err)
		}
		local := ""
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case p == semconvImportPath:
				local = "semconv"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			case strings.HasPrefix(p, modulePath+"/"):
				queue = append(queue, filepath.Join(moduleRoot, filepath.FromSlash(strings.TrimPrefix(p, modulePath+"/"))))
			}
		}
		if local == "" {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
					uses[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	isSource := func(name string) bool {
		return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			seen[path] = true
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if isSource(path) {
			read(path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		if seen[pkg] {
			continue
		}
		seen[pkg] = true
		entries, err := os.ReadDir(pkg)
		if err != nil {
			t.Fatalf("reading %s: %v", pkg, err)
		}
		for _, e := range entries {
			if !e.IsDir() && isSource(e.Name()) {
				read(filepath.Join(pkg, e.Name()))
			}
		}
	}
	return uses
}

// pythonWrites reports whether a non-test Python file under dir holds name
// as a string literal: the SDK is no Go package, and writes the names
// themselves.
func pythonWrites(t *testing.T, dir, name string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		base := d.Name()
		if d.IsDir() && (base == "tests" || base == "test") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(base, ".py") || strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(b)
		found = strings.Contains(s, `"`+name+`"`) || strings.Contains(s, `'`+name+`'`)
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return found
}

// contractLists reports whether the contract document has a table row for
// the attribute name: a script may send only what the contract lists.
func contractLists(t *testing.T, path, name string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the contract: %v", err)
	}
	return strings.Contains(string(b), "| `"+name+"` |")
}

// Each entry of the registry names a component that really writes the
// signal: its non-test code uses the constant (the SDK, the literal), so
// that the registry the correlator validates rules against cannot claim an
// emitter that does not emit.
func TestRuleSignalEmittersUseTheConstant(t *testing.T) {
	values := map[string]string{}
	for _, c := range packageConstants(t) {
		values[c.ident] = c.value
	}
	uses := map[string]map[string]bool{} // by emitter
	for i, ident := range registryEntries(t) {
		s := ruleSignals[i]
		if values[ident] != s.name {
			t.Fatalf("ruleSignals[%d]: %s is %q in the source, %q at run time", i, ident, values[ident], s.name)
		}
		dir := filepath.Join(moduleRoot, filepath.FromSlash(s.emitter))
		if s.emitter == emitterScriptLogs {
			if !contractLists(t, dir, s.name) {
				t.Errorf("%s (%q) is listed as sent by training scripts, but %s has no table row for it", ident, s.name, s.emitter)
			}
			continue
		}
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("ruleSignals[%d]: emitter %s of %s: %v", i, s.emitter, ident, err)
			continue
		}
		if s.emitter == emitterPythonSDK {
			if !pythonWrites(t, dir, s.name) {
				t.Errorf("%s (%q) is listed as written by %s, but no non-test Python file there holds %q", ident, s.name, s.emitter, s.name)
			}
			continue
		}
		if uses[s.emitter] == nil {
			uses[s.emitter] = semconvUses(t, dir)
		}
		if !uses[s.emitter][ident] {
			t.Errorf("%s (%q) is listed as emitted by %s, but no non-test Go file there uses semconv.%s", ident, s.name, s.emitter, ident)
		}
	}
}

func TestSignalEmitters(t *testing.T) {
	if got := SignalEmitters(MetricTrainingStepDuration); len(got) != 2 {
		t.Errorf("training.step.duration: emitters %v, want the stepmetrics connector and the correlator", got)
	}
	if got := SignalEmitters("gpu.nvlink.errors"); len(got) != 1 || got[0] != "receiver/dcgmreceiver" {
		t.Errorf("gpu.nvlink.errors: emitters %v, want [receiver/dcgmreceiver]", got)
	}
	if got := SignalEmitters("gpu.nvlink.errors{error.type=crc_flit}"); got != nil {
		t.Errorf("a selector is no signal name: got emitters %v", got)
	}
	if got := SignalEmitters("no.such.signal"); got != nil {
		t.Errorf("no.such.signal: emitters %v, want none", got)
	}
}
