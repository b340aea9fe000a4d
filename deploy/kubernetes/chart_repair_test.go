package kubernetes

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestChartRepair: agent.repair merges repair.yaml (and repair-tls.yaml
// with a TLS Secret) after config.yaml, opens the endpoint on the node
// (hostPort), mounts the gateway's public key and the certificate where
// the fragments read them, and admits the gateways only; the defaults do
// none of it. It refuses the modes it cannot run in.
func TestChartRepair(t *testing.T) {
	with := helmTemplate(t, scenarioByName(t, defaultScenario),
		"--set", "agent.repair.enabled=true", "--set", "agent.repair.port=9790",
		"--set", "agent.repair.tls.secretName=repair-tls")
	without := helmTemplate(t, scenarioByName(t, defaultScenario))

	pod := typed[appsv1.DaemonSet](t, with, "DaemonSet", "otelcol-gpu-agent").Spec.Template.Spec
	agent := pod.Containers[0]
	base := slices.Index(agent.Args, "--config=/etc/otelcol-gpu/config.yaml")
	frag := slices.Index(agent.Args, "--config=/etc/otelcol-gpu/repair.yaml")
	tls := slices.Index(agent.Args, "--config=/etc/otelcol-gpu/repair-tls.yaml")
	require.True(t, base >= 0 && frag > base && tls > frag, "config.yaml, repair.yaml, repair-tls.yaml in order: %v", agent.Args)
	assert.Contains(t, agent.Ports, corev1.ContainerPort{Name: "repair", ContainerPort: 8790, HostPort: 9790, Protocol: corev1.ProtocolTCP})
	for name, want := range map[string]string{
		"REPAIR_ENDPOINT":        "0.0.0.0:8790",
		"REPAIR_PUBLIC_KEY_FILE": "/etc/otelcol-gpu-repair/gateway.pub",
		"REPAIR_TLS_CERT_FILE":   "/etc/otelcol-gpu-repair-tls/tls.crt",
		"REPAIR_TLS_KEY_FILE":    "/etc/otelcol-gpu-repair-tls/tls.key",
		"REPAIR_DIAG_BACKEND":    "dcgm",
	} {
		v := envVar(agent, name)
		if assert.NotNil(t, v, name) {
			assert.Equal(t, want, v.Value, name)
		}
	}
	mounts := map[string]string{}
	for _, m := range agent.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if m.Name == "repair-key" || m.Name == "repair-tls" {
			assert.True(t, m.ReadOnly, m.Name)
		}
	}
	assert.Equal(t, "/etc/otelcol-gpu-repair", mounts["repair-key"])
	assert.Equal(t, "/etc/otelcol-gpu-repair-tls", mounts["repair-tls"])
	for _, v := range pod.Volumes {
		switch v.Name {
		case "repair-key":
			require.NotNil(t, v.Secret)
			assert.Equal(t, "otelcol-gpu-repair-public-key", v.Secret.SecretName)
			assert.Equal(t, []corev1.KeyToPath{{Key: "gateway.pub", Path: "gateway.pub"}}, v.Secret.Items)
		case "repair-tls":
			require.NotNil(t, v.Secret)
			assert.Equal(t, "repair-tls", v.Secret.SecretName)
		}
	}
	cm := typed[corev1.ConfigMap](t, with, "ConfigMap", "otelcol-gpu-agent-config")
	assert.Contains(t, cm.Data, "repair.yaml")
	assert.Contains(t, cm.Data, "repair-tls.yaml")

	np := typed[networkingv1.NetworkPolicy](t, with, "NetworkPolicy", "otelcol-gpu-agent")
	repairPort := intstr.FromString("repair")
	found := false
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port != nil && *p.Port == repairPort {
				found = true
				require.Len(t, rule.From, 1)
				require.NotNil(t, rule.From[0].PodSelector)
				assert.Nil(t, rule.From[0].NamespaceSelector, "the release's namespace only")
				assert.Equal(t, map[string]string{"app.kubernetes.io/name": "otelcol-gpu-gateway"}, rule.From[0].PodSelector.MatchLabels)
			}
		}
	}
	assert.True(t, found, "the NetworkPolicy admits the gateways to the repair port")

	// The defaults: no endpoint.
	defAgent := typed[appsv1.DaemonSet](t, without, "DaemonSet", "otelcol-gpu-agent").Spec.Template.Spec.Containers[0]
	assert.NotContains(t, defAgent.Args, "--config=/etc/otelcol-gpu/repair.yaml")
	assert.Nil(t, envVar(defAgent, "REPAIR_PUBLIC_KEY_FILE"))
	for _, p := range defAgent.Ports {
		assert.NotEqual(t, "repair", p.Name)
	}

	// Without TLS: repair.yaml alone.
	plain := helmTemplate(t, scenarioByName(t, defaultScenario), "--set", "agent.repair.enabled=true")
	plainAgent := typed[appsv1.DaemonSet](t, plain, "DaemonSet", "otelcol-gpu-agent").Spec.Template.Spec.Containers[0]
	assert.Contains(t, plainAgent.Args, "--config=/etc/otelcol-gpu/repair.yaml")
	assert.NotContains(t, plainAgent.Args, "--config=/etc/otelcol-gpu/repair-tls.yaml")
	assert.Nil(t, envVar(plainAgent, "REPAIR_TLS_CERT_FILE"))

	// Modes it cannot run in, and no key: the render fails naming the value.
	for _, tc := range []struct{ values, set, want string }{
		{"small-cluster-values.yaml", "agent.repair.enabled=true", "agent.repair.enabled"},
		{"standalone-values.yaml", "agent.repair.enabled=true", "agent.repair.enabled"},
		{"dev-values.yaml", "agent.repair.enabled=true,agent.repair.publicKey.secretName=", "agent.repair.publicKey.secretName"},
	} {
		out := helmFails(t, "template", releaseName, chartDir, "-f", filepath.Join(chartDir, "ci", tc.values), "--set", tc.set)
		assert.Contains(t, out, tc.want, tc.values)
	}
}
