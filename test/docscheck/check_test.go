package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTree writes files (slash-separated path -> content) under a new
// directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	return root
}

func problemStrings(ps []Problem) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// catalogueGo is a fields.go with a three-field catalogue.
const catalogueGo = `package model

type Field struct{ Name string }

var Catalogue = []Field{
	{Name: "A"},
	{Name: "B"},
	{Name: "C"},
}
`

const goMod = "module example.com/m\n\ngo 1.26.0\n"

// componentsReadme is README.md with a Components table of one receiver.
const componentsReadme = "# m\n\n## Components\n\n| component | kind | status |\n|---|---|---|\n" +
	"| [`xreceiver`](receiver/xreceiver) (`x`) | receiver (agent) | reads x |\n\n## Docs\n"

// minimalRepo is a repository Check passes: the catalogue, go.mod, the
// three manifests and README.md's Components table.
func minimalRepo() map[string]string {
	manifest := "receivers:\n  - gomod: example.com/m v0.0.0\n    import: example.com/m/receiver/xreceiver\n    path: .\n"
	return map[string]string{
		catalogueFile:                         catalogueGo,
		"go.mod":                              goMod,
		"builder-config.yaml":                 manifest,
		"distributions/agent/manifest.yaml":   manifest,
		"distributions/gateway/manifest.yaml": "receivers: []\n",
		"receiver/xreceiver/metadata.yaml":    "type: x\n",
		"README.md":                           componentsReadme,
	}
}

func TestCheckStalePathFailsValidPasses(t *testing.T) {
	files := minimalRepo()
	files["deploy/helm/otelcol-gpu/templates/agent-daemonset.yaml"] = "kind: DaemonSet\n"
	files["docs/guide.md"] = "# Guide\n" +
		"The DaemonSet: `deploy/helm/otelcol-gpu/templates/agent-daemonset.yaml`.\n" +
		"It was `deploy/kubernetes/base/agent-daemonset.yaml`.\n"
	root := writeTree(t, files)

	problems, err := Check(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"docs/guide.md:3: deploy/kubernetes/base/agent-daemonset.yaml does not exist"}, problemStrings(problems))

	// Fixed, it passes.
	files["docs/guide.md"] = "# Guide\nThe DaemonSet: `deploy/helm/otelcol-gpu/templates/agent-daemonset.yaml`.\n"
	problems, err = Check(writeTree(t, files))
	require.NoError(t, err)
	assert.Empty(t, problems)
}

func TestCheckYAMLComments(t *testing.T) {
	files := minimalRepo()
	files["distributions/agent/config.yaml"] = "" +
		"# The queue's emptyDir (deploy/kubernetes/base/agent-daemonset.yaml).\n" +
		"receivers:\n" +
		"  ib:\n" +
		"    root: deploy/not/a/comment # the value is not checked, only this: docs/missing.md\n" +
		"    note: \"a # in quotes: deploy/quoted\"\n"
	// YAML elsewhere is not read.
	files["receiver/xreceiver/testconfig.yaml"] = "# deploy/elsewhere.yaml\n"
	root := writeTree(t, files)

	problems, err := Check(root)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"distributions/agent/config.yaml:1: deploy/kubernetes/base/agent-daemonset.yaml does not exist",
		"distributions/agent/config.yaml:4: docs/missing.md does not exist",
	}, problemStrings(problems))
}

func TestCheckSkipsBuildOutputsAndTestdata(t *testing.T) {
	files := minimalRepo()
	files["_build/notes.md"] = "deploy/gone.yaml\n"
	files["receiver/xreceiver/testdata/README.md"] = "deploy/gone.yaml\n"
	files[".tools/x/README.md"] = "deploy/gone.yaml\n"
	problems, err := Check(writeTree(t, files))
	require.NoError(t, err)
	assert.Empty(t, problems)
}

func TestPathExists(t *testing.T) {
	root := writeTree(t, map[string]string{
		"deploy/slurm/prolog.sh":               "",
		"deploy/slurm/epilog.sh":               "",
		"distributions/agent/config.yaml":      "",
		"distributions/gateway/config.yaml":    "",
		"internal/steprecord/record.go":        "",
		"receiver/r/internal/frdump/x/x.go":    "",
		"deploy/helm/otelcol-gpu/Chart.yaml":   "",
		"deploy/grafana/dashboards/steps.json": "",
	})
	for _, c := range []struct {
		dir, tok string
		want     bool
	}{
		{".", "deploy/slurm/prolog.sh", true},
		{".", "deploy/slurm/gone.sh", false},
		{".", "deploy/slurm/prolog.sh.", true},      // end of a sentence
		{".", "deploy/slurm/prolog.sh:12", true},    // a line
		{".", "deploy/slurm/prolog.sh:12-20", true}, // lines
		{".", "docs/x.md#section", false},
		{".", "deploy/slurm/*.sh", true},
		{".", "deploy/slurm/*.py", false},
		{".", "distributions/{agent,gateway}/config.yaml", true},
		{".", "distributions/{agent,small}/config.yaml", false},
		{".", "deploy/...", true},
		{".", "deploy/kubernetes/...", false},
		{".", "deploy/helm/<chart>/Chart.yaml", true},
		{".", "deploy/gone/<chart>/Chart.yaml", false},
		{".", "deploy/grafana/dashboards/{{ .name }}.json", true},
		{".", "deploy/helm/$(HELM_CHART)", true},
		{".", "internal/steprecord.TraceID", true},
		{".", "internal/steprecord.Gone", true}, // the symbol is not looked for
		{".", "internal/gone.TraceID", false},
		{".", "extension/encoding/otlpencodingextension@v0.165.1", true}, // another module's
		{".", "dist/otelcol-gpu-agent_0.2.0-1_amd64.deb", true},          // made by make release
		{".", "_build/helm/default.yaml", true},
		{"receiver/r", "internal/frdump/x", true}, // relative to the file's folder
		{".", "internal/frdump/x", false},
	} {
		assert.Equal(t, c.want, pathExists(root, c.dir, c.tok), "%s in %s", c.tok, c.dir)
	}
}

func TestRepoPathFindsPathsNotURLs(t *testing.T) {
	var got []string
	for _, m := range repoPath.FindAllStringSubmatch("see deploy/a.yaml, `docs/b.md` and (receiver/c); "+
		"not https://github.com/x/docs/y, /var/lib/deploy/z or go.opentelemetry.io/collector/receiver/otlpreceiver; "+
		"go test ./test/e2e/... --config=distributions/d.yaml", -1) {
		got = append(got, m[1])
	}
	assert.Equal(t, []string{"deploy/a.yaml,", "docs/b.md", "receiver/c", "test/e2e/...", "distributions/d.yaml"}, got)
}

func TestMarkdownLinks(t *testing.T) {
	files := minimalRepo()
	files["docs/a.md"] = "[b](b.md#x), [readme](../README.md), [site](https://example.com/gone.md), [top](#top)\n" +
		"[gone](../deploy/gone.md)\n"
	files["docs/b.md"] = "# b\n"
	problems, err := Check(writeTree(t, files))
	require.NoError(t, err)
	assert.Equal(t, []string{"docs/a.md:2: link target ../deploy/gone.md does not exist (relative to docs/)"}, problemStrings(problems))
}

func TestYAMLComment(t *testing.T) {
	for line, want := range map[string]string{
		"# whole line":                   " whole line",
		"  key: value # after a value":   " after a value",
		"  key: \"a # b\" # the comment": " the comment",
		"  key: 'a # b'":                 "",
		"  url: http://x/#anchor":        "",
		"  # it's a comment":             " it's a comment",
	} {
		got, _ := yamlComment(line)
		assert.Equal(t, want, got, line)
	}
}

func TestFieldCounts(t *testing.T) {
	docs := []doc{
		{path: "README.md", lines: []textLine{
			{1, "empty: the built-in 3 fields"},
			{2, "not only the agent's 3 built-in"},
			{3, "fields: every"},
			{4, "not only the agent's 61 built-in"}, // wrapped: reported at the number's line
			{5, "DCGM fields"},
			{6, "The built-in set has 4 fields (the docs said 61)."},
			{7, "61 fields of which 3 are built in"}, // not the phrase
		}},
		{path: "distributions/agent/prometheus-endpoint.yaml", lines: []textLine{
			{20, "                             built-in 55 fields"},
		}},
	}
	assert.Equal(t, []string{
		"README.md:4: says 61 built-in fields; the dcgm receiver has 3 (len(Catalogue) in " + catalogueFile + ")",
		"README.md:6: says 4 built-in fields; the dcgm receiver has 3 (len(Catalogue) in " + catalogueFile + ")",
		"distributions/agent/prometheus-endpoint.yaml:20: says 55 built-in fields; the dcgm receiver has 3 (len(Catalogue) in " + catalogueFile + ")",
	}, problemStrings(checkFieldCounts(docs, 3)))
}

func TestCheckFieldCountInDocs(t *testing.T) {
	files := minimalRepo()
	files["docs/a.md"] = "The agent reads its 3 built-in fields.\n\nOr its 5 built-in fields.\n"
	problems, err := Check(writeTree(t, files))
	require.NoError(t, err)
	assert.Equal(t, []string{"docs/a.md:3: says 5 built-in fields; the dcgm receiver has 3 (len(Catalogue) in " + catalogueFile + ")"}, problemStrings(problems))
}

// The real catalogue: the parse counts what a count of its element lines
// counts (each field is one line starting with {ID:).
func TestCatalogueLenOfTheRepository(t *testing.T) {
	n, err := catalogueLen("../..")
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join("../..", filepath.FromSlash(catalogueFile)))
	require.NoError(t, err)
	assert.Equal(t, len(regexp.MustCompile(`(?m)^\t\{ID: `).FindAll(src, -1)), n)
	assert.Positive(t, n)
}

func TestCatalogueLenErrors(t *testing.T) {
	_, err := catalogueLen(writeTree(t, map[string]string{catalogueFile: "package model\n\nvar Other = []int{1}\n"}))
	assert.ErrorContains(t, err, "no var Catalogue")
	_, err = catalogueLen(t.TempDir())
	assert.ErrorContains(t, err, "the dcgm catalogue")
}

func TestComponents(t *testing.T) {
	files := minimalRepo()
	files["processor/yprocessor/metadata.yaml"] = "type: y\n"
	files["extension/zextension/metadata.yaml"] = "type: z\n"
	files["distributions/gateway/manifest.yaml"] = "" +
		"receivers:\n  - gomod: example.com/m v0.0.0\n    import: example.com/m/receiver/xreceiver\n    path: .\n" +
		"processors:\n  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor v0.161.0\n" +
		"extensions:\n  - gomod: example.com/m v0.0.0\n    import: example.com/m/extension/zextension\n    path: .\n"
	files["README.md"] = "# m\n\n## Components\n\n| component | kind | status |\n|---|---|---|\n" +
		"| [`xreceiver`](receiver/xreceiver) (`x`) | receiver (agent, gateway, all-in-one) | fine |\n" + // 7
		"| [`yprocessor`](processor/yprocessor) (`y`) | processor | in no manifest |\n" + // 8
		"| [`x`](receiver/xreceiver) (`xx`) | receiver | wrong type |\n" + // 9
		"| [`zextension`](extension/zextension) (`z`) | extension (agent) | only in the gateway |\n" + // 10
		"| tail sampling (contrib, v0.161.0) | processor (gateway) | fine |\n" + // 11
		"| tail sampling (contrib, v0.165.1) | processor | wrong version |\n" + // 12
		"| group by trace (contrib, v0.161.0) | processor | in no manifest |\n" + // 13
		"| [`sdk/python`](sdk/python) | training scripts | not a component |\n" + // 14
		"\n## Docs\n\n| [`yprocessor`](processor/yprocessor) | processor | after the table |\n"
	files["sdk/python/README.md"] = "# sdk\n"
	problems, err := checkComponents(writeTree(t, files))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"README.md:8: component processor/yprocessor is in no ocb manifest's processors (builder-config.yaml, distributions/agent/manifest.yaml, distributions/gateway/manifest.yaml)",
		"README.md:9: component receiver/xreceiver: the table says type xx, its metadata.yaml says x",
		"README.md:10: component extension/zextension: the table says agent, but distributions/agent/manifest.yaml has no such extension",
		"README.md:12: tail sampling (contrib) says v0.165.1; the manifests have v0.161.0",
		"README.md:13: group by trace (contrib): no ocb manifest's processors has a module ending /groupbytraceprocessor (builder-config.yaml, distributions/agent/manifest.yaml, distributions/gateway/manifest.yaml)",
	}, problemStrings(problems))
}

func TestComponentsNeedsTheTable(t *testing.T) {
	files := minimalRepo()
	files["README.md"] = "# m\n\nNo table.\n"
	_, err := checkComponents(writeTree(t, files))
	assert.ErrorContains(t, err, `no "## Components" table`)
}

// The repository's README names components the manifests really hold: the
// parse finds the rows (a table nobody reads would pass anything).
func TestComponentRowsOfTheRepository(t *testing.T) {
	rows, err := componentRows("../..", "README.md")
	require.NoError(t, err)
	links := 0
	for _, r := range rows {
		links += len(componentLink.FindAllString(r.cells[0], -1))
	}
	assert.GreaterOrEqual(t, links, 10, "component links in README.md's Components table")
	assert.True(t, strings.HasPrefix(rows[0].cells[0], "[`"), rows[0].cells[0])
}
