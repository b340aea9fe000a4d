package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// chartDir is the Helm chart, the one definition of the Kubernetes
// deployment (deploy/helm/otelcol-gpu).
var chartDir = filepath.Join(repoRoot, "deploy", "helm", "otelcol-gpu")

const (
	// releaseName and releaseNamespace are what deploy/README.md installs.
	releaseName      = "otelcol-gpu"
	releaseNamespace = "otelcol-gpu"
)

// scenario is a tested variant of the chart: the values files of
// deploy/helm/otelcol-gpu/ci it is installed with, in order.
type scenario struct {
	name   string
	values []string
}

const (
	// otlpAuthOverlay is production with OTLP auth (ci/production-otlp-auth-values.yaml).
	otlpAuthOverlay = "production-otlp-auth"
)

// The scenarios: what the kustomize overlays were (dev, production,
// production-otlp-auth), the small-cluster mode without Kafka, and the
// chart's defaults.
const (
	devScenario          = "dev"
	productionScenario   = "production"
	smallClusterScenario = "small-cluster"
	defaultScenario      = "default"
	// dcgmExporterDropInScenario: the agents serve dcgm-exporter's page
	// (ci/dcgm-exporter-dropin-values.yaml).
	dcgmExporterDropInScenario = "dcgm-exporter-dropin"
	// consoleScenario: the fault console on the Kafka gateways
	// (ci/console-values.yaml); smallClusterConsoleScenario: the same over
	// the small-cluster mode, whose central has a NetworkPolicy.
	consoleScenario             = "console"
	smallClusterConsoleScenario = "small-cluster-console"
	// standaloneScenario: the agent alone, no gateway
	// (ci/standalone-values.yaml, agent.mode standalone).
	standaloneScenario = "standalone"
)

var scenarios = []scenario{
	{devScenario, []string{"dev-values.yaml"}},
	{productionScenario, []string{"production-values.yaml"}},
	{otlpAuthOverlay, []string{"production-values.yaml", "production-otlp-auth-values.yaml"}},
	{smallClusterScenario, []string{"small-cluster-values.yaml"}},
	{dcgmExporterDropInScenario, []string{"dcgm-exporter-dropin-values.yaml"}},
	{consoleScenario, []string{"console-values.yaml"}},
	{smallClusterConsoleScenario, []string{"small-cluster-values.yaml", "console-values.yaml"}},
	{standaloneScenario, []string{"standalone-values.yaml"}},
	{defaultScenario, nil},
}

func scenarioByName(t *testing.T, name string) scenario {
	t.Helper()
	for _, s := range scenarios {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no scenario %s", name)
	return scenario{}
}

// valuesArgs are the -f flags of s's values files.
func (s scenario) valuesArgs() []string {
	var args []string
	for _, v := range s.values {
		args = append(args, "-f", filepath.Join(chartDir, "ci", v))
	}
	return args
}

// helmBin is the helm CLI ($HELM, else .tools/bin/helm); missing, the test
// fails saying how to get it.
func helmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		bin = filepath.Join(repoRoot, ".tools", "bin", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm missing at %s: make tools (or GOBIN=$PWD/.tools/bin go install helm.sh/helm/v3/cmd/helm@v3.22.0)", bin)
	}
	abs, err := filepath.Abs(bin)
	require.NoError(t, err)
	return abs
}

// runHelm runs the helm CLI and returns its standard output.
func runHelm(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), stderr.String())
	return out
}

// helmTemplate renders the chart for s as `helm install` would in namespace
// otelcol-gpu.
func helmTemplate(t *testing.T, s scenario, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", releaseName, chartDir, "--namespace", releaseNamespace}, s.valuesArgs()...)
	objs := decodeObjects(t, runHelm(t, nil, append(args, extra...)...))
	require.NotEmpty(t, objs)
	return objs
}

// decodeObjects reads a stream of YAML documents as objects.
func decodeObjects(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs
}

// chartCopies: per source folder of the repository, the folder of the
// chart's files/ holding byte-identical copies of its files (Helm cannot
// read outside the chart), and how a copy's name follows from the source's.
var chartCopies = []struct {
	source, copy, prefix string
	keep                 func(name string) bool
}{
	{"distributions/agent", "files/agent", "", func(n string) bool { return strings.HasSuffix(n, ".yaml") && n != "manifest.yaml" }},
	{"distributions/gateway", "files/gateway", "", func(n string) bool { return strings.HasSuffix(n, ".yaml") && n != "manifest.yaml" }},
	{"deploy/rbac", "files/rbac", "", func(n string) bool { return strings.HasSuffix(n, ".yaml") && n != "kustomization.yaml" }},
	{"deploy/rbac/eviction", "files/rbac", "eviction-", func(n string) bool { return strings.HasSuffix(n, ".yaml") && n != "kustomization.yaml" }},
	{"deploy/rbac/repair", "files/rbac", "repair-", func(n string) bool { return strings.HasSuffix(n, ".yaml") && n != "kustomization.yaml" }},
	{"deploy/prometheus", "files/prometheus", "", func(n string) bool { return n == "rules.yaml" }},
	{"deploy/grafana/dashboards", "files/dashboards", "", func(n string) bool { return strings.HasSuffix(n, ".json") }},
}

// TestChartFilesMatchSources: every file the chart ships from elsewhere in
// the repository is a byte-identical copy, and every copy has a source: a
// stale or orphaned copy would deploy an old config, rule or dashboard.
func TestChartFilesMatchSources(t *testing.T) {
	copies := map[string]bool{}
	require.NoError(t, filepath.WalkDir(filepath.Join(chartDir, "files"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(chartDir, path)
			copies[filepath.ToSlash(rel)] = true
		}
		return err
	}))
	for _, c := range chartCopies {
		entries, err := os.ReadDir(filepath.Join(repoRoot, c.source))
		require.NoError(t, err)
		n := 0
		for _, e := range entries {
			if e.IsDir() || !c.keep(e.Name()) {
				continue
			}
			n++
			source := filepath.Join(repoRoot, c.source, e.Name())
			copyPath := c.copy + "/" + c.prefix + e.Name()
			want, err := os.ReadFile(source)
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(chartDir, copyPath))
			if err != nil || !bytes.Equal(want, got) {
				t.Errorf("deploy/helm/otelcol-gpu/%s is not %s/%s: run deploy/helm/sync.sh", copyPath, c.source, e.Name())
			}
			delete(copies, copyPath)
		}
		assert.NotZero(t, n, "nothing to copy from %s", c.source)
	}
	for orphan := range copies {
		t.Errorf("deploy/helm/otelcol-gpu/%s has no source left: run deploy/helm/sync.sh", orphan)
	}
}

// TestRenderedWorkloadsAreCurrent: deploy/kubernetes/rendered holds the
// default values' agent DaemonSet and gateway StatefulSet for cmd/loadgen
// and the load tests, which measure the collectors with the deployed Go
// runtime settings; they must be what the chart renders today.
func TestRenderedWorkloadsAreCurrent(t *testing.T) {
	for _, name := range []string{"agent-daemonset", "gateway-statefulset"} {
		t.Run(name, func(t *testing.T) {
			out := runHelm(t, nil, "template", releaseName, chartDir, "--namespace", releaseNamespace,
				"--show-only", "templates/"+name+".yaml")
			var want []string
			for _, line := range strings.SplitAfter(string(out), "\n") {
				if line != "---\n" && !strings.HasPrefix(line, "# Source: ") {
					want = append(want, line)
				}
			}
			got, err := os.ReadFile(filepath.Join("rendered", name+".yaml"))
			require.NoError(t, err)
			// The two header lines of deploy/helm/sync.sh, then the render.
			lines := strings.SplitAfterN(string(got), "\n", 3)
			require.Len(t, lines, 3)
			if lines[2] != strings.Join(want, "") {
				t.Errorf("deploy/kubernetes/rendered/%s.yaml is not the chart's render: run deploy/helm/sync.sh", name)
			}
		})
	}
}

// TestChartVersion: the chart is released with the collectors; its
// appVersion (the images' default tag) and version are VERSION.
func TestChartVersion(t *testing.T) {
	version, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	require.NoError(t, err)
	var chart struct {
		Version string `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &chart))
	v := strings.TrimSpace(string(version))
	assert.Equal(t, v, chartAppVersion(t), "Chart.yaml appVersion")
	assert.Equal(t, v, chart.Version, "Chart.yaml version")
}

// chartAppVersion is Chart.yaml's appVersion, the images' default tag.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &chart))
	require.NotEmpty(t, chart.AppVersion)
	return chart.AppVersion
}

// TestChartValuesDocumented: every value of values.yaml has a row in the
// chart README's table (by its dotted path), and every row names a value.
func TestChartValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(b, &values))
	var paths []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		// Kubernetes fields taken whole (a node selector, resources,
		// labels, security contexts) are one value.
		last := prefix[strings.LastIndex(prefix, ".")+1:]
		if !ok || len(m) == 0 || slices.Contains([]string{"nodeSelector", "resources", "labels", "annotations", "securityContext", "podSecurityContext", "affinity"}, last) {
			paths = append(paths, prefix)
			return
		}
		for k, sub := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, sub)
		}
	}
	walk("", values)
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	require.NoError(t, err)
	for _, p := range paths {
		assert.Contains(t, string(readme), "\n| `"+p+"` |", "deploy/helm/otelcol-gpu/README.md has no row for value %s", p)
	}
}

// typed finds the one object of kind (and name, when not empty) and
// converts it to T.
func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			found = append(found, o)
		}
	}
	require.Len(t, found, 1, "%s %s", kind, name)
	out := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(found[0].Object, out, true))
	return out
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// TestHelmLint: helm lint --strict passes for every scenario (make
// helm-lint runs the same in CI).
func TestHelmLint(t *testing.T) {
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			out := runHelm(t, nil, append([]string{"lint", "--strict", chartDir}, s.valuesArgs()...)...)
			assert.Contains(t, string(out), "0 chart(s) failed")
		})
	}
}

// podChecksums are the checksum/config annotations of the agent's and the
// gateway's pod templates.
func podChecksums(t *testing.T, objs []*unstructured.Unstructured) [2]string {
	t.Helper()
	return [2]string{
		typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent").Spec.Template.Annotations["checksum/config"],
		typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway").Spec.Template.Annotations["checksum/config"],
	}
}

// TestConfigChangeRollsPods: the pods' checksum/config annotation is
// stable for the same chart and values, and changes with a collector
// config or an endpoint, so that helm upgrade rolls the pods then and only
// then (kustomize's hash-suffixed ConfigMap names did this before).
func TestConfigChangeRollsPods(t *testing.T) {
	s := scenarioByName(t, defaultScenario)
	base := podChecksums(t, helmTemplate(t, s))
	for _, sum := range base {
		require.Regexp(t, `^[0-9a-f]{64}$`, sum)
	}
	assert.Equal(t, base, podChecksums(t, helmTemplate(t, s)), "same chart, same values: same checksum")

	moved := podChecksums(t, helmTemplate(t, s, "--set", "endpoints.kafkaBrokers=kafka.example:9092"))
	assert.NotEqual(t, base[0], moved[0], "agent: an endpoint changed")
	assert.NotEqual(t, base[1], moved[1], "gateway: an endpoint changed")

	// A copy of the chart whose agent config has one more line.
	dir := filepath.Join(t.TempDir(), "otelcol-gpu")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir)))
	config := filepath.Join(dir, "files", "agent", "config.yaml")
	require.NoError(t, os.Chmod(config, 0o644))
	b, err := os.ReadFile(config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(config, append(b, "# changed\n"...), 0o644))
	out := runHelm(t, nil, "template", releaseName, dir, "--namespace", releaseNamespace)
	changed := podChecksums(t, decodeObjects(t, out))
	assert.NotEqual(t, base[0], changed[0], "agent: its config changed")
	assert.Equal(t, base[1], changed[1], "gateway: only the agent's config changed")
}
