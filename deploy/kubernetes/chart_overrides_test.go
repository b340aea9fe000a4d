package kubernetes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/otelcol-gpu/otelcol-gpu/deploy/internal/gomemlimit"
)

// valuesFile writes values (YAML) to a file for -f.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	var check map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(values), &check))
	file := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(file, []byte(values), 0o600))
	return file
}

// workloads are the agent DaemonSet's and the gateway StatefulSet's pod
// templates in objs.
func workloads(t *testing.T, objs []*unstructured.Unstructured) (agent, gateway corev1.PodTemplateSpec) {
	t.Helper()
	return typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent").Spec.Template,
		typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway").Spec.Template
}

// TestChartImageOverrides: global.imageRegistry replaces the registry of
// every image (or prefixes a repository without one, busybox), and a
// digest pins an image as repository@digest; without them the references
// are today's.
func TestChartImageOverrides(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	v := chartAppVersion(t)
	objs := helmTemplate(t, scenarioByName(t, defaultScenario), "-f", valuesFile(t, `
global:
  imageRegistry: mirror.example:5000/
images:
  gateway:
    digest: `+digest+`
`))
	agent, gateway := workloads(t, objs)
	assert.Equal(t, "mirror.example:5000/otelcol-gpu/otelcol-gpu-agent:"+v, agent.Spec.Containers[0].Image)
	assert.Equal(t, "mirror.example:5000/busybox:1.37", agent.Spec.InitContainers[0].Image, "a repository without a registry is prefixed")
	assert.Equal(t, "mirror.example:5000/otelcol-gpu/otelcol-gpu-gateway@"+digest, gateway.Spec.Containers[0].Image)

	objs = helmTemplate(t, scenarioByName(t, defaultScenario), "--set", "images.agent.digest="+digest, "--set", "images.agent.tag=ignored")
	agent, gateway = workloads(t, objs)
	assert.Equal(t, "ghcr.io/otelcol-gpu/otelcol-gpu-agent@"+digest, agent.Spec.Containers[0].Image, "the digest, not the tag")
	assert.Equal(t, "busybox:1.37", agent.Spec.InitContainers[0].Image)
	assert.Equal(t, "ghcr.io/otelcol-gpu/otelcol-gpu-gateway:"+v, gateway.Spec.Containers[0].Image)

	out := helmFails(t, "template", releaseName, chartDir, "--set", "images.agent.digest=latest")
	assert.Contains(t, out, "/images/agent/digest")
}

// TestChartPodOverrides: pod annotations and labels, the agent's affinity,
// extra volumes and mounts, priority classes and both security contexts
// reach the pods; the chart's selector labels and config checksum stay and
// may not be restated.
func TestChartPodOverrides(t *testing.T) {
	s := scenarioByName(t, defaultScenario)
	objs := helmTemplate(t, s, "-f", valuesFile(t, `
agent:
  podAnnotations: {example.com/owner: gpu-team}
  podLabels: {team: gpu}
  priorityClassName: gpu-critical
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - {key: node.example.com/pool, operator: In, values: [training]}
  extraVolumes:
    - {name: site-ca, configMap: {name: site-ca}}
  extraVolumeMounts:
    - {name: site-ca, mountPath: /etc/site-ca, readOnly: true}
  podSecurityContext:
    seccompProfile: {type: Localhost, localhostProfile: otelcol-gpu.json}
  securityContext:
    capabilities:
      add: null
gateway:
  podAnnotations: {example.com/owner: platform}
  podLabels: {team: platform}
  priorityClassName: platform-high
  extraVolumes:
    - {name: spool, emptyDir: {}}
  extraVolumeMounts:
    - {name: spool, mountPath: /spool}
  podSecurityContext:
    runAsUser: 20000
    fsGroup: 20000
  securityContext:
    readOnlyRootFilesystem: false
`))
	agent, gateway := workloads(t, objs)
	base := helmTemplate(t, s)
	baseAgent, baseGateway := workloads(t, base)

	for _, c := range []struct {
		name             string
		got, base        corev1.PodTemplateSpec
		owner, team, pcn string
		volume, mount    string
	}{
		{"agent", agent, baseAgent, "gpu-team", "gpu", "gpu-critical", "site-ca", "/etc/site-ca"},
		{"gateway", gateway, baseGateway, "platform", "platform", "platform-high", "spool", "/spool"},
	} {
		assert.Equal(t, c.owner, c.got.Annotations["example.com/owner"], c.name)
		assert.Equal(t, c.base.Annotations["checksum/config"], c.got.Annotations["checksum/config"], "%s: the checksum stays", c.name)
		assert.Equal(t, c.team, c.got.Labels["team"], c.name)
		assert.Equal(t, "otelcol-gpu-"+c.name, c.got.Labels["app.kubernetes.io/name"], "%s: the selector's label", c.name)
		assert.Equal(t, c.name, c.got.Labels["app.kubernetes.io/component"], c.name)
		assert.Equal(t, c.pcn, c.got.Spec.PriorityClassName, c.name)
		assert.Equal(t, len(c.base.Spec.Volumes)+1, len(c.got.Spec.Volumes), "%s: one more volume", c.name)
		assert.Equal(t, c.volume, c.got.Spec.Volumes[len(c.got.Spec.Volumes)-1].Name, c.name)
		mounts := c.got.Spec.Containers[0].VolumeMounts
		assert.Equal(t, corev1.VolumeMount{Name: c.volume, MountPath: c.mount, ReadOnly: c.volume == "site-ca"}, mounts[len(mounts)-1], c.name)
	}
	for _, sel := range []map[string]string{
		typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent").Spec.Selector.MatchLabels,
		typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway").Spec.Selector.MatchLabels,
	} {
		assert.Len(t, sel, 1, "podLabels never reach a selector")
	}
	require.NotNil(t, agent.Spec.Affinity)
	assert.Equal(t, "node.example.com/pool",
		agent.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key)
	assert.Nil(t, baseAgent.Spec.Affinity, "no agent affinity by default")
	assert.Equal(t, "", baseGateway.Spec.PriorityClassName)
	assert.Equal(t, "system-node-critical", baseAgent.Spec.PriorityClassName)

	// Security contexts: today's by default, a value changes one field and
	// keeps the others.
	assert.Equal(t, &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}, baseAgent.Spec.SecurityContext)
	assert.Equal(t, &corev1.SecurityContext{
		Privileged: to(false), AllowPrivilegeEscalation: to(false), ReadOnlyRootFilesystem: to(true),
		RunAsUser: to(int64(0)), RunAsNonRoot: to(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"SYSLOG"}},
	}, baseAgent.Spec.Containers[0].SecurityContext)
	assert.Equal(t, &corev1.PodSecurityContext{
		RunAsNonRoot: to(true), RunAsUser: to(int64(10001)), RunAsGroup: to(int64(10001)), FSGroup: to(int64(10001)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}, baseGateway.Spec.SecurityContext)
	assert.Equal(t, &corev1.SecurityContext{
		Privileged: to(false), AllowPrivilegeEscalation: to(false), ReadOnlyRootFilesystem: to(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}, baseGateway.Spec.Containers[0].SecurityContext)

	assert.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: to("otelcol-gpu.json")}, agent.Spec.SecurityContext.SeccompProfile)
	asc := agent.Spec.Containers[0].SecurityContext
	assert.Empty(t, asc.Capabilities.Add, "null removes the default")
	assert.Equal(t, []corev1.Capability{"ALL"}, asc.Capabilities.Drop)
	assert.Equal(t, to(int64(0)), asc.RunAsUser, "the other defaults stay")
	assert.Equal(t, to(int64(20000)), gateway.Spec.SecurityContext.RunAsUser)
	assert.Equal(t, to(int64(20000)), gateway.Spec.SecurityContext.FSGroup)
	assert.Equal(t, to(true), gateway.Spec.SecurityContext.RunAsNonRoot, "the other defaults stay")
	assert.Equal(t, to(false), gateway.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.Capability{"ALL"}, gateway.Spec.Containers[0].SecurityContext.Capabilities.Drop)

	for _, set := range []string{"agent.podLabels.app\\.kubernetes\\.io/name=mine", "gateway.podAnnotations.checksum/config=x"} {
		out := helmFails(t, "template", releaseName, chartDir, "--set", set)
		assert.Contains(t, out, "is the chart's", set)
	}
}

// TestChartServiceMonitorOverrides: relabelings after the chart's job one,
// metric relabelings, the scrape timeout and honorLabels, on the
// collectors' ServiceMonitors and the dcgm-exporter page's.
func TestChartServiceMonitorOverrides(t *testing.T) {
	sm := `
  scrapeTimeout: 10s
  honorLabels: true
  relabelings:
    - {action: replace, targetLabel: cluster, replacement: gpu-east}
  metricRelabelings:
    - {action: drop, sourceLabels: [__name__], regex: go_gc_.*}
`
	objs := helmTemplate(t, scenarioByName(t, dcgmExporterDropInScenario), "-f", valuesFile(t,
		"serviceMonitor:\n  enabled: true"+sm+"agent:\n  prometheusEndpoint:\n    serviceMonitor:"+strings.ReplaceAll(sm, "\n  ", "\n      ")))
	base := helmTemplate(t, scenarioByName(t, dcgmExporterDropInScenario), "--set", "serviceMonitor.enabled=true")
	for _, c := range []struct{ name, job string }{
		{"otelcol-gpu-agent", "otelcol-gpu-agent"},
		{"otelcol-gpu-gateway", "otelcol-gpu-gateway"},
		{"otelcol-gpu-agent-dcgm-exporter", "nvidia-dcgm-exporter"},
	} {
		endpoint := func(objs []*unstructured.Unstructured) map[string]any {
			o := typed[unstructured.Unstructured](t, objs, "ServiceMonitor", c.name)
			eps, _, _ := unstructured.NestedSlice(o.Object, "spec", "endpoints")
			require.Len(t, eps, 1, c.name)
			return eps[0].(map[string]any)
		}
		ep := endpoint(objs)
		job := map[string]any{"action": "replace", "targetLabel": "job", "replacement": c.job}
		assert.Equal(t, []any{job, map[string]any{"action": "replace", "targetLabel": "cluster", "replacement": "gpu-east"}}, ep["relabelings"], c.name)
		assert.Equal(t, []any{map[string]any{"action": "drop", "sourceLabels": []any{"__name__"}, "regex": "go_gc_.*"}}, ep["metricRelabelings"], c.name)
		assert.Equal(t, "10s", ep["scrapeTimeout"], c.name)
		assert.Equal(t, true, ep["honorLabels"], c.name)

		b := endpoint(base)
		assert.Equal(t, []any{job}, b["relabelings"], "%s: the job relabeling alone by default", c.name)
		for _, k := range []string{"metricRelabelings", "scrapeTimeout", "honorLabels"} {
			assert.NotContains(t, b, k, "%s: not set by default", c.name)
		}
	}
	out := helmFails(t, "template", releaseName, chartDir, "--set", "serviceMonitor.scrapeTimeout=ten")
	assert.Contains(t, out, "/serviceMonitor/scrapeTimeout")
}

// TestChartGoMemLimitFollowsMemoryLimit: without goMemLimit, GOMEMLIMIT is
// derived from the container's memory limit and suits its memory_limiter
// (a 64Mi agent does not get the 256Mi agent's value); a goMemLimit is
// used as given; a limit it cannot read fails the render naming it.
func TestChartGoMemLimitFollowsMemoryLimit(t *testing.T) {
	s := scenarioByName(t, defaultScenario)
	for _, tc := range []struct{ agent, gateway, wantAgent, wantGateway string }{
		{"64Mi", "1Gi", "34MiB", "552MiB"},
		{"256Mi", "8Gi", "138MiB", "4423MiB"},
		{"1.5Gi", "16Gi", "829MiB", "8847MiB"},
		{"500M", "12G", "257MiB", "6179MiB"},
	} {
		objs := helmTemplate(t, s, "--set", "agent.resources.limits.memory="+tc.agent, "--set", "gateway.resources.limits.memory="+tc.gateway)
		agent, gateway := workloads(t, objs)
		for _, c := range []struct {
			want string
			pod  corev1.PodSpec
		}{{tc.wantAgent, agent.Spec}, {tc.wantGateway, gateway.Spec}} {
			ctr := c.pod.Containers[0]
			got := envVar(ctr, "GOMEMLIMIT")
			require.NotNil(t, got, ctr.Name)
			assert.Equal(t, c.want, got.Value, "%s: limit %s", ctr.Name, ctr.Resources.Limits.Memory())
			n, err := gomemlimit.Parse(got.Value)
			require.NoError(t, err)
			config := chartFile(t, ctr.Name, "config.yaml")
			assert.NoError(t, gomemlimit.CheckConfig(n, ctr.Resources.Limits.Memory().Value(), config), "%s: limit %s", ctr.Name, ctr.Resources.Limits.Memory())
		}
	}

	agent, gateway := workloads(t, helmTemplate(t, s, "--set", "agent.goMemLimit=100MiB", "--set", "gateway.goMemLimit=4GiB"))
	assert.Equal(t, "100MiB", envVar(agent.Spec.Containers[0], "GOMEMLIMIT").Value, "set: as given")
	assert.Equal(t, "4GiB", envVar(gateway.Spec.Containers[0], "GOMEMLIMIT").Value)

	for _, tc := range []struct{ set, want string }{
		{"agent.resources.limits.memory=null", "agent.goMemLimit: empty, and agent.resources.limits.memory is not set"},
		{"gateway.resources.limits.memory=2.5e9", `gateway.resources.limits.memory: "2.5e9" is not a quantity`},
		{"agent.goMemLimit=140M", "/agent/goMemLimit"},
	} {
		out := helmFails(t, "template", releaseName, chartDir, "--set", tc.set)
		assert.Contains(t, out, tc.want, tc.set)
	}
}

// chartFile is the chart's copy of distributions/<who>/<name>.
func chartFile(t *testing.T, who, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "files", who, name))
	require.NoError(t, err)
	return b
}

func to[T any](v T) *T { return &v }
