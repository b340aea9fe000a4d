package semconv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// docs/semconv.md rule 3: lower-case, dot-separated segments, "_" inside a
// segment. Upper case appears only where a sysfs file name is an attribute
// value, never in a name.
var nameRule = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)

// nameKinds are the identifier prefixes of constants that hold names
// (attributes, metrics, spans, events, the correlator's signals). The other
// constants hold values (DirectionTransmit, ProfUnitSM, NCCLSource*) or
// scope names, and a Prefix or Suffix constant holds a fragment of names.
var nameKinds = []string{"Attr", "Metric", "Span", "Event", "Signal"}

// constant is one string constant of this package, from its source.
type constant struct {
	ident, value string
}

// kind returns the name kind of c (a nameKinds entry), "" for a value.
func (c constant) kind() string {
	if strings.HasSuffix(c.ident, "Prefix") || strings.HasSuffix(c.ident, "Suffix") {
		return ""
	}
	for _, k := range nameKinds {
		if strings.HasPrefix(c.ident, k) {
			return k
		}
	}
	return ""
}

// packageConstants parses this package's non-test files and returns every
// constant it declares, so that a new constant is checked without a list
// to keep by hand.
func packageConstants(t *testing.T) []constant {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []constant
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: constant %s is not a string literal", fset.Position(id.Pos()), id.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, constant{ident: id.Name, value: v})
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no constants found")
	}
	return out
}

// outsideContract lists names that break the rule because a contract
// outside this repository fixed them before it; each says which.
var outsideContract = map[string]string{
	"AttrDurationNs": "docs/training-scripts.md: the field of a step log record that scripts write",
}

func TestNamesFollowRules(t *testing.T) {
	checked := 0
	exempted := map[string]bool{}
	for _, c := range packageConstants(t) {
		if c.kind() == "" {
			continue
		}
		checked++
		if _, ok := outsideContract[c.ident]; ok {
			exempted[c.ident] = true
			continue
		}
		if !nameRule.MatchString(c.value) {
			t.Errorf("%s = %q breaks the naming rule %s", c.ident, c.value, nameRule)
		}
	}
	if checked == 0 {
		t.Error("no name constants found")
	}
	for ident := range outsideContract {
		if !exempted[ident] {
			t.Errorf("outsideContract names %s, which is no name constant of this package: remove it", ident)
		}
	}
}

// An attribute and a metric must not share a name: after translation to
// Prometheus a label and a metric name would collide in readers' minds and
// in recording rules.
func TestMetricAndAttributeNamesDiffer(t *testing.T) {
	consts := packageConstants(t)
	attrs := map[string]string{} // name -> constant
	for _, c := range consts {
		if c.kind() != "Attr" {
			continue
		}
		if other, dup := attrs[c.value]; dup {
			t.Errorf("attribute %q declared twice (%s, %s)", c.value, other, c.ident)
		}
		attrs[c.value] = c.ident
	}
	for _, c := range consts {
		if c.kind() == "Metric" && attrs[c.value] != "" {
			t.Errorf("%q is both a metric (%s) and an attribute (%s)", c.value, c.ident, attrs[c.value])
		}
	}
	if reflect.DeepEqual(DirectionTransmit, DirectionReceive) {
		t.Error("directions must differ")
	}
}
