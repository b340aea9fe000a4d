package kubernetes

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// shutdownDeadline is the extension that bounds a binary's whole shutdown
// (extension/shutdowndeadlineextension).
const shutdownDeadline = "shutdown_deadline"

// shutdownBound is what SIGTERM may take whatever is full or down (issue
// 29): half the chart's grace period and the units' TimeoutStopSec.
const shutdownBound = 30 * time.Second

// parseCollectorConfig reads a collector config file's YAML as the
// collector's confmap does (nothing resolved: ${env:...} stays as written).
func parseCollectorConfig(t *testing.T, name string, b []byte) *confmap.Conf {
	t.Helper()
	var raw map[string]any
	require.NoError(t, yaml.Unmarshal(b, &raw), name)
	return confmap.NewFromStringMap(raw)
}

// checkShutdownDeadline: the merged config conf runs the extension with a
// deadline within issue 29's bound and under stopAfter, the time the
// platform gives the process before it kills it.
func checkShutdownDeadline(t *testing.T, what string, conf *confmap.Conf, stopAfter time.Duration) {
	t.Helper()
	listed, _ := conf.Get("service::extensions").([]any)
	if !slices.Contains(listed, any(shutdownDeadline)) {
		t.Errorf("%s: service::extensions %v lacks %s: SIGTERM would not be bounded", what, listed, shutdownDeadline)
	}
	if !conf.IsSet("extensions::" + shutdownDeadline) {
		t.Errorf("%s: no extensions::%s", what, shutdownDeadline)
		return
	}
	raw, _ := conf.Get("extensions::" + shutdownDeadline + "::deadline").(string)
	d, err := time.ParseDuration(raw)
	if err != nil {
		t.Errorf("%s: %s::deadline %q: %v", what, shutdownDeadline, raw, err)
		return
	}
	if d > shutdownBound || d >= stopAfter {
		t.Errorf("%s: %s::deadline %s, want at most %s and under the %s the process is given to stop", what, shutdownDeadline, d, shutdownBound, stopAfter)
	}
}

// unitsStopAfter is the shortest TimeoutStopSec of the systemd units.
func unitsStopAfter(t *testing.T) time.Duration {
	t.Helper()
	shortest := time.Duration(0)
	for _, unit := range []string{"otelcol-gpu-agent.service", "otelcol-gpu-gateway.service"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "systemd", unit))
		require.NoError(t, err)
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "TimeoutStopSec="); ok {
				d, err := time.ParseDuration(v)
				require.NoError(t, err, "%s: TimeoutStopSec=%s", unit, v)
				if !found || d < shortest {
					shortest = d
				}
				found = true
			}
		}
		require.True(t, found, "%s has no TimeoutStopSec", unit)
	}
	return shortest
}

// TestShippedConfigsBoundShutdown: every shipped collector config runs the
// shutdown_deadline extension, however its fragments are merged. Merging
// replaces lists, so a fragment that restates service::extensions without
// it would silently unbound SIGTERM wherever it is merged: each fragment
// that restates the list names it, each base config.yaml defines it, and
// config.yaml merged with every subset of its distribution's fragments (in
// name order; the per-file checks make the order irrelevant) runs it with a
// deadline under the units' TimeoutStopSec (the chart's grace period is
// TestChartConfigsBoundShutdown's).
func TestShippedConfigsBoundShutdown(t *testing.T) {
	stopAfter := unitsStopAfter(t)
	for _, dist := range []string{"agent", "gateway", "otelcol-gpu"} {
		t.Run(dist, func(t *testing.T) {
			dir := filepath.Join(repoRoot, "distributions", dist)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			files := map[string]*confmap.Conf{}
			var fragments []string
			for _, e := range entries {
				name := e.Name()
				if !strings.HasSuffix(name, ".yaml") || name == "manifest.yaml" {
					continue
				}
				b, err := os.ReadFile(filepath.Join(dir, name))
				require.NoError(t, err)
				files[name] = parseCollectorConfig(t, name, b)
				if name != "config.yaml" {
					fragments = append(fragments, name)
				}
				if files[name].IsSet("service::extensions") {
					listed, _ := files[name].Get("service::extensions").([]any)
					assert.Contains(t, listed, any(shutdownDeadline), "%s restates service::extensions without %s", name, shutdownDeadline)
				}
			}
			base, ok := files["config.yaml"]
			require.True(t, ok)
			checkShutdownDeadline(t, "config.yaml", base, stopAfter)
			require.Less(t, len(fragments), 10, "2^n merges")
			for set := range 1 << len(fragments) {
				merged := confmap.New()
				require.NoError(t, merged.Merge(base))
				names := []string{"config.yaml"}
				for i, f := range fragments {
					if set&(1<<i) != 0 {
						require.NoError(t, merged.Merge(files[f]))
						names = append(names, f)
					}
				}
				checkShutdownDeadline(t, strings.Join(names, " + "), merged, stopAfter)
			}
		})
	}
}

// TestChartConfigsBoundShutdown: in every tested values scenario, the
// agent's and the gateway's --config files, read from the rendered
// ConfigMaps they are mounted from and merged in their order (the chart's
// own fragments, console-tls.yaml and the remediation platform's, among
// them), run the shutdown_deadline extension with a deadline under the
// pod's terminationGracePeriodSeconds.
func TestChartConfigsBoundShutdown(t *testing.T) {
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			objs := helmTemplate(t, s)
			configMaps := map[string]*corev1.ConfigMap{}
			for _, o := range objs {
				if o.GetKind() == "ConfigMap" {
					configMaps[o.GetName()] = typed[corev1.ConfigMap](t, objs, "ConfigMap", o.GetName())
				}
			}
			var pods []podOf
			for _, o := range objs {
				switch o.GetKind() {
				case "DaemonSet":
					ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet", o.GetName())
					pods = append(pods, podOf{"DaemonSet " + o.GetName(), ds.Spec.Template.Spec})
				case "StatefulSet":
					sts := typed[appsv1.StatefulSet](t, objs, "StatefulSet", o.GetName())
					pods = append(pods, podOf{"StatefulSet " + o.GetName(), sts.Spec.Template.Spec})
				}
			}
			checked := 0
			for _, pod := range pods {
				for _, c := range pod.spec.Containers {
					if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--config=") }) {
						continue // not a collector (dcgm-exporter's drop-in and the like)
					}
					require.NotNil(t, pod.spec.TerminationGracePeriodSeconds, "%s: no terminationGracePeriodSeconds", pod.name)
					grace := time.Duration(*pod.spec.TerminationGracePeriodSeconds) * time.Second
					merged := confmap.New()
					for _, a := range c.Args {
						path, ok := strings.CutPrefix(a, "--config=")
						if !ok {
							continue
						}
						b, err := renderedConfigMapFile(pod.spec, c, configMaps, path)
						require.NoError(t, err, "%s container %s: %s", pod.name, c.Name, path)
						require.NoError(t, merged.Merge(parseCollectorConfig(t, path, []byte(b))))
					}
					checkShutdownDeadline(t, fmt.Sprintf("%s container %s (%v)", pod.name, c.Name, c.Args), merged, grace)
					checked++
				}
			}
			assert.Positive(t, checked, "no collector container rendered")
		})
	}
}

// podOf is a workload's pod template, named by the workload.
type podOf struct {
	name string
	spec corev1.PodSpec
}

// renderedConfigMapFile is the content of path in container c: the key of
// the ConfigMap volume mounted at path's directory.
func renderedConfigMapFile(spec corev1.PodSpec, c corev1.Container, configMaps map[string]*corev1.ConfigMap, path string) (string, error) {
	dir, key := filepath.Dir(path), filepath.Base(path)
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir && m.SubPath == "" })
	if i < 0 {
		return "", fmt.Errorf("nothing mounted at %s", dir)
	}
	v := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	if v < 0 || spec.Volumes[v].ConfigMap == nil {
		return "", fmt.Errorf("the volume mounted at %s is not a ConfigMap", dir)
	}
	cm, ok := configMaps[spec.Volumes[v].ConfigMap.Name]
	if !ok {
		return "", fmt.Errorf("ConfigMap %s not rendered", spec.Volumes[v].ConfigMap.Name)
	}
	data, ok := cm.Data[key]
	if !ok {
		keys := slices.Sorted(maps.Keys(cm.Data))
		return "", fmt.Errorf("ConfigMap %s has no key %s (keys: %v)", cm.Name, key, keys)
	}
	return data, nil
}
