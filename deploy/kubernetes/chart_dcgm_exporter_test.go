package kubernetes

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"
)

// TestChartDCGMExporterDropIn: agent.prometheusEndpoint and agent.dcgm
// (ci/dcgm-exporter-dropin-values.yaml) merge prometheus-endpoint.yaml, open
// dcgm-exporter's port under its name, serve it through a Service and a
// ServiceMonitor keeping dcgm-exporter's job, admit Prometheus's namespace
// to it, mount the counters CSV (a valid one) and, for pod labels, mount the
// token and grant read access to pods; the defaults do none of it.
func TestChartDCGMExporterDropIn(t *testing.T) {
	with := helmTemplate(t, scenarioByName(t, dcgmExporterDropInScenario))
	without := helmTemplate(t, scenarioByName(t, defaultScenario))

	pod := typed[appsv1.DaemonSet](t, with, "DaemonSet", "otelcol-gpu-agent").Spec.Template.Spec
	agent := pod.Containers[0]
	assert.Contains(t, agent.Args, "--config=/etc/otelcol-gpu/prometheus-endpoint.yaml")
	assert.Less(t, slices.Index(agent.Args, "--config=/etc/otelcol-gpu/config.yaml"), slices.Index(agent.Args, "--config=/etc/otelcol-gpu/prometheus-endpoint.yaml"))
	assert.Contains(t, agent.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9400, Protocol: corev1.ProtocolTCP})
	for name, want := range map[string]string{
		"DCGM_EXPORTER_LISTEN":       "0.0.0.0:9400",
		"DCGM_EXPORTER_COLLECTORS":   "/etc/otelcol-gpu/counters.csv",
		"GPU_POD_LABELS":             "true",
		"GPU_NAMING":                 "otel",
		"GPU_ATTRIBUTION_KUBERNETES": "true",
	} {
		v := envVar(agent, name)
		if assert.NotNil(t, v, name) {
			assert.Equal(t, want, v.Value, name)
		}
	}
	assert.Nil(t, envVar(agent, "GPU_COLLECTORS"), "the main pipeline keeps its fields unless collectorsForMainPipeline")
	require.NotNil(t, pod.AutomountServiceAccountToken)
	assert.True(t, *pod.AutomountServiceAccountToken, "pod labels need the token")

	cm := typed[corev1.ConfigMap](t, with, "ConfigMap", "otelcol-gpu-agent-config")
	csv := filepath.Join(t.TempDir(), "counters.csv")
	require.NoError(t, os.WriteFile(csv, []byte(cm.Data["counters.csv"]), 0o600))
	for _, naming := range []string{dcgmreceiver.NamingDCGMExporter, dcgmreceiver.NamingOTel} {
		cfg := dcgmreceiver.NewFactory().CreateDefaultConfig().(*dcgmreceiver.Config)
		cfg.Collectors, cfg.Naming = csv, naming
		assert.NoError(t, cfg.Validate(), "the values file's CSV is one the agent accepts (%s)", naming)
	}

	svc := typed[corev1.Service](t, with, "Service", "otelcol-gpu-agent-dcgm-exporter")
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	assert.Equal(t, "otelcol-gpu-agent", svc.Spec.Selector["app.kubernetes.io/name"])
	assert.Equal(t, "nvidia-dcgm-exporter", svc.Labels["app"], "service.labels")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, "metrics", svc.Spec.Ports[0].Name)
	assert.Equal(t, int32(9400), svc.Spec.Ports[0].Port)
	assert.Equal(t, intstr.FromString("metrics"), svc.Spec.Ports[0].TargetPort)

	sm := findObject(t, with, "ServiceMonitor", "otelcol-gpu-agent-dcgm-exporter")
	require.NotNil(t, sm)
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		assert.Equal(t, v, svc.Labels[k], "the ServiceMonitor selects the Service (%s)", k)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	ep := endpoints[0].(map[string]any)
	assert.Equal(t, "metrics", ep["port"])
	assert.Contains(t, ep["relabelings"], map[string]any{"action": "replace", "targetLabel": "job", "replacement": "nvidia-dcgm-exporter"})

	np := typed[networkingv1.NetworkPolicy](t, with, "NetworkPolicy", "otelcol-gpu-agent")
	metrics := intstr.FromString("metrics")
	admitted := false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port != nil && *p.Port == metrics {
				admitted = len(rule.From) == 1 && rule.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "monitoring"
			}
		}
	}
	assert.True(t, admitted, "Prometheus's namespace may scrape the page")

	role := typed[rbacv1.ClusterRole](t, with, "ClusterRole", "otelcol-gpu-agent-pod-labels")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}, role.Rules)
	binding := typed[rbacv1.ClusterRoleBinding](t, with, "ClusterRoleBinding", "otelcol-gpu-agent-pod-labels")
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "otelcol-gpu-agent", Namespace: releaseNamespace}}, binding.Subjects)

	// The defaults: none of it.
	defPod := typed[appsv1.DaemonSet](t, without, "DaemonSet", "otelcol-gpu-agent").Spec.Template.Spec
	assert.NotContains(t, defPod.Containers[0].Args, "--config=/etc/otelcol-gpu/prometheus-endpoint.yaml")
	assert.Nil(t, envVar(defPod.Containers[0], "GPU_POD_LABELS"))
	require.NotNil(t, defPod.AutomountServiceAccountToken)
	assert.False(t, *defPod.AutomountServiceAccountToken)
	for _, kind := range []string{"ServiceMonitor", "ClusterRole", "Service"} {
		for _, name := range []string{"otelcol-gpu-agent-dcgm-exporter", "otelcol-gpu-agent-pod-labels"} {
			assert.Nil(t, findObject(t, without, kind, name), "%s %s", kind, name)
		}
	}
	assert.NotContains(t, typed[corev1.ConfigMap](t, without, "ConfigMap", "otelcol-gpu-agent-config").Data, "counters.csv")
}

// Values that cannot work fail the render, naming the value.
func TestChartDCGMExporterDropInRefusals(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"agent:\n  prometheusEndpoint: {enabled: true}\ndcgm:\n  source: exporter\n", "agent.prometheusEndpoint.enabled: not with dcgm.source exporter"},
		// values.schema.json refuses it first, naming the value and its choices.
		{"agent:\n  dcgm: {naming: prometheus}\n", `at '/agent/dcgm/naming': value must be one of 'otel', 'dcgm_exporter'`},
		{"agent:\n  dcgm: {collectorsForMainPipeline: true}\n", "agent.dcgm.collectorsForMainPipeline: needs agent.dcgm.collectorsCSV"},
	} {
		file := filepath.Join(t.TempDir(), "v.yaml")
		require.NoError(t, os.WriteFile(file, []byte(tc.values), 0o600))
		out, err := exec.Command(helmBin(t), "template", releaseName, chartDir, "-f", file).CombinedOutput()
		require.Error(t, err, "%s rendered", tc.values)
		assert.Contains(t, string(out), tc.want)
	}
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}
