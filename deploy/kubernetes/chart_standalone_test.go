package kubernetes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/otelcol-gpu/otelcol-gpu/deploy/internal/gomemlimit"
)

// TestChartStandalone: agent.mode standalone (ci/standalone-values.yaml)
// renders the agent alone on distributions/agent/standalone.yaml, and so
// does agent.mode standalone by itself (gateway.enabled left at its
// default); what cannot go with it fails the render naming the value.
func TestChartStandalone(t *testing.T) {
	checkStandalone(t, helmTemplate(t, scenarioByName(t, standaloneScenario)))

	objs := helmTemplate(t, scenarioByName(t, defaultScenario), "--set", "agent.mode=standalone")
	checkNoGateway(t, objs)
	ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent")
	assert.Equal(t, []string{"--config=/etc/otelcol-gpu/standalone.yaml"}, ds.Spec.Template.Spec.Containers[0].Args)

	// The pipeline mode is today's: config.yaml first, and a gateway.
	objs = helmTemplate(t, scenarioByName(t, defaultScenario), "--set", "agent.mode=pipeline")
	ds = typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent")
	assert.Equal(t, "--config=/etc/otelcol-gpu/config.yaml", ds.Spec.Template.Spec.Containers[0].Args[0])
	typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway")

	for _, tc := range []struct{ set, want string }{
		{"smallCluster.enabled=true", "agent.mode: standalone sends nowhere; smallCluster.enabled"},
		{"agent.otlp.auth.enabled=true", "agent.otlp.auth.enabled: standalone.yaml has no OTLP receiver"},
		{"agent.dcgm.podLabels=true", "agent.dcgm.podLabels: standalone.yaml's page has no pod attribution"},
		{"agent.mode=alone", "/agent/mode"},
	} {
		out := helmFails(t, "template", releaseName, chartDir, "-f", filepath.Join(chartDir, "ci", "standalone-values.yaml"), "--set", tc.set)
		assert.Contains(t, out, tc.want, tc.set)
	}
}

// checkNoGateway: nothing of the gateway is rendered (its workload,
// Services, ConfigMaps, budget, policies, RBAC, ServiceMonitor).
func checkNoGateway(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		id := o.GetKind() + " " + o.GetName()
		assert.NotEqual(t, "StatefulSet", o.GetKind(), id)
		assert.NotEqual(t, "PodDisruptionBudget", o.GetKind(), id)
		assert.False(t, strings.HasPrefix(o.GetName(), "otelcol-gpu-gateway") || strings.HasPrefix(o.GetName(), "otelcol-gpu-central") ||
			strings.HasPrefix(o.GetName(), "otelcol-gpu-remediation"), "%s: a gateway object", id)
		assert.NotEqual(t, "otelcol-gpu-gateway", o.GetLabels()["app.kubernetes.io/name"], "%s: a gateway object", id)
	}
}

// checkStandalone: the standalone scenario's objects. The agent runs
// standalone.yaml alone (the ConfigMap's copy is the distribution's file),
// with neither Kafka's environment nor the queue, dump directories or
// pod-resources socket; it serves dcgm-exporter's page on :9400 behind
// Service otelcol-gpu-agent-dcgm-exporter and its ServiceMonitor; there is
// no OTLP Service or rule, and no gateway object.
func checkStandalone(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	checkNoGateway(t, objs)
	ds := typed[appsv1.DaemonSet](t, objs, "DaemonSet", "otelcol-gpu-agent")
	pod := ds.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	agent := pod.Containers[0]
	assert.Equal(t, []string{"--config=/etc/otelcol-gpu/standalone.yaml"}, agent.Args, "standalone.yaml alone")
	want, err := os.ReadFile(filepath.Join(repoRoot, "distributions", "agent", "standalone.yaml"))
	require.NoError(t, err)
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-agent-config")
	assert.Equal(t, string(want), cm.Data["standalone.yaml"], "not distributions/agent/standalone.yaml: run deploy/helm/sync.sh")
	c := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.ConfigMap != nil && v.ConfigMap.Name == cm.Name })
	require.GreaterOrEqual(t, c, 0, "the config ConfigMap is mounted")

	for _, e := range agent.Env {
		assert.False(t, strings.HasPrefix(e.Name, "KAFKA_") || strings.HasPrefix(e.Name, "OTLP_") || strings.HasPrefix(e.Name, "OTELCOL_GPU_CENTRAL"),
			"%s: standalone.yaml sends nowhere", e.Name)
	}
	assert.Equal(t, "0.0.0.0:9400", envVar(agent, "DCGM_EXPORTER_LISTEN").Value, "the page beyond loopback")
	assert.Equal(t, "0.0.0.0:13133", envVar(agent, "OTELCOL_GPU_HEALTH_ENDPOINT").Value)
	assert.Empty(t, pod.InitContainers, "no dump directories to prepare")
	var hostPaths []string
	for _, v := range pod.Volumes {
		assert.NotEqual(t, "queue", v.Name, "no disk queue")
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	assert.ElementsMatch(t, []string{"/sys", "/dev/kmsg"}, hostPaths, "InfiniBand from sysfs, XIDs from the kernel log, nothing else of the host")
	var ports []string
	for _, p := range agent.Ports {
		ports = append(ports, p.Name)
	}
	assert.ElementsMatch(t, []string{"health", "telemetry", "metrics"}, ports, "no OTLP")
	assert.Contains(t, agent.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9400, Protocol: corev1.ProtocolTCP})

	goMemLimit, err := gomemlimit.Parse(envVar(agent, "GOMEMLIMIT").Value)
	require.NoError(t, err)
	assert.NoError(t, gomemlimit.CheckConfig(goMemLimit, agent.Resources.Limits.Memory().Value(), want), "standalone.yaml's memory_limiter")

	for _, o := range objs {
		if o.GetKind() == "Service" {
			assert.NotEqual(t, "otelcol-gpu-agent", o.GetName(), "no OTLP Service")
		}
	}
	svc := typed[corev1.Service](t, objs, "Service", "otelcol-gpu-agent-dcgm-exporter")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, "metrics", svc.Spec.Ports[0].Name)
	sm := typed[unstructured.Unstructured](t, objs, "ServiceMonitor", "otelcol-gpu-agent-dcgm-exporter")
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, eps, 1)
	assert.Equal(t, "metrics", eps[0].(map[string]any)["port"])

	np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "otelcol-gpu-agent")
	var admitted []string
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			admitted = append(admitted, p.Port.String())
		}
	}
	assert.ElementsMatch(t, []string{"telemetry", "metrics"}, admitted, "Prometheus only")
}
