package kubernetes

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaRefusal is the start of what helm says when values.schema.json
// refuses the values.
const schemaRefusal = "values don't meet the specifications of the schema"

// helmFails runs helm with args, which must fail, and returns what it
// wrote (stdout and stderr: helm lint reports on stdout).
func helmFails(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.Error(t, cmd.Run(), "helm %s passed:\n%.2000s", strings.Join(args, " "), out.String())
	return out.String()
}

// TestChartSchemaRefusesBadValues: values.schema.json types every value
// and closes the chart's own objects, so a wrong type or a misspelt key
// fails helm lint --strict, helm template (and so helm install and
// upgrade) naming the value, instead of being ignored.
func TestChartSchemaRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name, set string
		want      []string
	}{
		{"replicas not a number", "gateway.replicas=three", []string{"/gateway/replicas", "want integer"}},
		{"misspelt key", "agent.resorces.limits.cpu=1", []string{"/agent", "'resorces' not allowed"}},
		{"misspelt top-level key", "serviceMonitr.enabled=true", []string{"'serviceMonitr' not allowed"}},
		{"unknown enum value", "remediation.platform=k8s", []string{"/remediation/platform"}},
		{"unknown key in an image", "images.agent.tags=1.0", []string{"/images/agent", "'tags' not allowed"}},
		{"misspelt resources field", "agent.resources.limit.memory=1Gi", []string{"/agent/resources", "'limit' not allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range [][]string{
				{"lint", "--strict", chartDir},
				{"template", releaseName, chartDir, "--namespace", releaseNamespace},
			} {
				out := helmFails(t, append(cmd, "--set", tc.set)...)
				assert.Contains(t, out, schemaRefusal, "helm %s --set %s", cmd[0], tc.set)
				for _, w := range tc.want {
					assert.Contains(t, out, w, "helm %s --set %s", cmd[0], tc.set)
				}
			}
		})
	}
}

// TestChartSchemaAcceptsCIValues: every values file of ci/, alone, passes
// the schema and helm lint --strict, and each is one of the scenarios the
// render, lint and envtest tests install (a new file is tested, not just
// kept).
func TestChartSchemaAcceptsCIValues(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(chartDir, "ci"))
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "-values.yaml") {
			t.Errorf("ci/%s: not a values file (*-values.yaml)", e.Name())
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			out := runHelm(t, nil, "lint", "--strict", chartDir, "-f", filepath.Join(chartDir, "ci", e.Name()))
			assert.Contains(t, string(out), "0 chart(s) failed")
			assert.True(t, slices.ContainsFunc(scenarios, func(s scenario) bool { return slices.Contains(s.values, e.Name()) }),
				"ci/%s is in no scenario of chart_test.go", e.Name())
		})
	}
}
