package kubernetes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestExtraConfigMergedLast: docs/customizing.md's fragments given to the
// chart as agent.extraConfig and gateway.extraConfig land in the config
// ConfigMaps unchanged and are the last --config of their container, so a
// cluster label or a dropped metric needs neither a rebuild nor a fork of
// the chart; without them there is no such file and no such argument.
func TestExtraConfigMergedLast(t *testing.T) {
	fragments := map[string]map[string]any{}
	for _, c := range []string{"agent", "gateway"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "examples", c+"-customize.yaml"))
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(b, &m))
		require.NotEmpty(t, m)
		fragments[c] = m
	}
	values, err := yaml.Marshal(map[string]any{
		"agent":   map[string]any{"extraConfig": fragments["agent"]},
		"gateway": map[string]any{"extraConfig": fragments["gateway"]},
	})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "extra-values.yaml")
	require.NoError(t, os.WriteFile(file, values, 0o600))

	s := scenarioByName(t, defaultScenario)
	with := helmTemplate(t, s, "-f", file)
	without := helmTemplate(t, s)
	assert.NotEqual(t, podChecksums(t, without), podChecksums(t, with), "a fragment rolls the pods")

	for _, c := range []struct{ component, configMap string }{
		{"agent", "otelcol-gpu-agent-config"},
		{"gateway", "otelcol-gpu-gateway-config"},
	} {
		cm := typed[corev1.ConfigMap](t, with, "ConfigMap", c.configMap)
		var got map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(cm.Data["extra-config.yaml"]), &got))
		assert.Equal(t, fragments[c.component], got, "%s: the fragment as given", c.component)
		assert.NotContains(t, typed[corev1.ConfigMap](t, without, "ConfigMap", c.configMap).Data, "extra-config.yaml")
	}
	agentWith := typed[appsv1.DaemonSet](t, with, "DaemonSet", "otelcol-gpu-agent").Spec.Template.Spec.Containers[0].Args
	gatewayWith := typed[appsv1.StatefulSet](t, with, "StatefulSet", "otelcol-gpu-gateway").Spec.Template.Spec.Containers[0].Args
	for name, args := range map[string][]string{"agent": agentWith, "gateway": gatewayWith} {
		require.NotEmpty(t, args)
		assert.Equal(t, "--config=/etc/otelcol-gpu/extra-config.yaml", args[len(args)-1], "%s: the fragment is merged last", name)
	}
	agentWithout := typed[appsv1.DaemonSet](t, without, "DaemonSet", "otelcol-gpu-agent").Spec.Template.Spec.Containers[0].Args
	assert.NotContains(t, agentWithout, "--config=/etc/otelcol-gpu/extra-config.yaml")
}
