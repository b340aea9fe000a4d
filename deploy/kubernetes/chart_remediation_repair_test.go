package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"
)

// repairOn turns on both sides of the repair loop over TLS.
var repairOn = []string{
	"--set", "agent.repair.enabled=true", "--set", "agent.repair.port=9790",
	"--set", "agent.repair.tls.secretName=repair-tls",
	"--set", "remediation.repair.enabled=true",
	"--set", "remediation.repair.agentCA.secretName=repair-ca",
	"--set", "remediation.repair.agentServerName=repair.example.internal",
}

// gatewayRemediation resolves the rendered gateway config.yaml with the
// gateway container's plain env (as the collector would, the rest at
// their defaults) and decodes and validates the remediation exporter.
func gatewayRemediation(t *testing.T, objs []*unstructured.Unstructured, gw corev1.Container) (*remediationexporter.Config, error) {
	t.Helper()
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-gateway-config")
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600))
	for _, name := range []string{"REMEDIATION_REPAIR", "REMEDIATION_REPAIR_AGENT_PORT", "REMEDIATION_REPAIR_PRIVATE_KEY_FILE",
		"REMEDIATION_REPAIR_AGENT_CA_FILE", "REMEDIATION_REPAIR_AGENT_SERVER_NAME", "REMEDIATION_DRY_RUN"} {
		t.Setenv(name, "")                    // restored after the test ...
		require.NoError(t, os.Unsetenv(name)) // ... and unset: only this pod's env counts
	}
	for _, e := range gw.Env {
		if e.ValueFrom == nil {
			t.Setenv(e.Name, e.Value)
		}
	}
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"file:" + path},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		DefaultScheme:     "env",
	})
	require.NoError(t, err)
	conf, err := resolver.Resolve(context.Background())
	require.NoError(t, err)
	require.NoError(t, resolver.Shutdown(context.Background()))
	sub, err := conf.Sub("exporters::remediation")
	require.NoError(t, err)
	cfg := remediationexporter.NewFactory().CreateDefaultConfig().(*remediationexporter.Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg, confmap.Validate(cfg)
}

// TestChartRemediationRepair: remediation.repair sets the gateway's
// REMEDIATION_REPAIR* variables, which the shipped config turns into the
// exporter's repair section (https://{node}:<agent.repair.port>, the
// mounted key and CA), mounts the private key and the CA read-only and,
// on platform kubernetes, binds deploy/rbac/repair (the drained check
// lists pods) without nvsentinel. The defaults do none of it; the render
// refuses a loop without the agents' endpoint, TLS or the key's Secret.
func TestChartRemediationRepair(t *testing.T) {
	with := helmTemplate(t, scenarioByName(t, defaultScenario), append(repairOn, "--set", "remediation.platform=kubernetes")...)
	pod := typed[appsv1.StatefulSet](t, with, "StatefulSet", "otelcol-gpu-gateway").Spec.Template.Spec
	gw := pod.Containers[0]
	for name, want := range map[string]string{
		"REMEDIATION_REPAIR":                   "true",
		"REMEDIATION_REPAIR_AGENT_PORT":        "9790",
		"REMEDIATION_REPAIR_PRIVATE_KEY_FILE":  "/etc/otelcol-gpu-repair-key/gateway.key",
		"REMEDIATION_REPAIR_AGENT_CA_FILE":     "/etc/otelcol-gpu-repair-ca/ca.crt",
		"REMEDIATION_REPAIR_AGENT_SERVER_NAME": "repair.example.internal",
	} {
		v := envVar(gw, name)
		if assert.NotNil(t, v, name) {
			assert.Equal(t, want, v.Value, name)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range gw.VolumeMounts {
		mounts[m.Name] = m
	}
	assert.Equal(t, corev1.VolumeMount{Name: "repair-private-key", MountPath: "/etc/otelcol-gpu-repair-key", ReadOnly: true}, mounts["repair-private-key"])
	assert.Equal(t, corev1.VolumeMount{Name: "repair-agent-ca", MountPath: "/etc/otelcol-gpu-repair-ca", ReadOnly: true}, mounts["repair-agent-ca"])
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	if key := volumes["repair-private-key"].Secret; assert.NotNil(t, key) {
		assert.Equal(t, "otelcol-gpu-repair-private-key", key.SecretName)
		assert.Equal(t, []corev1.KeyToPath{{Key: "gateway.key", Path: "gateway.key"}}, key.Items)
		require.NotNil(t, key.DefaultMode)
		assert.Equal(t, int32(0o440), *key.DefaultMode, "the gateway's group only")
	}
	if ca := volumes["repair-agent-ca"].Secret; assert.NotNil(t, ca) {
		assert.Equal(t, "repair-ca", ca.SecretName)
		assert.Equal(t, []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}, ca.Items)
	}

	cfg, err := gatewayRemediation(t, with, gw)
	require.NoError(t, err, "dry run (the default): valid without the key file's content")
	assert.True(t, cfg.Repair.Enabled)
	assert.Equal(t, "https://{node}:9790", cfg.Repair.Agent.Endpoint)
	assert.Equal(t, "/etc/otelcol-gpu-repair-key/gateway.key", cfg.Repair.Agent.PrivateKeyFile)
	assert.Equal(t, "/etc/otelcol-gpu-repair-ca/ca.crt", cfg.Repair.Agent.TLS.CAFile)
	assert.Equal(t, "repair.example.internal", cfg.Repair.Agent.TLS.ServerName)

	role := typed[rbacv1.ClusterRole](t, with, "ClusterRole", "otelcol-gpu-remediation-repair")
	assert.True(t, grants(role.Rules, "", "pods", "list"))
	binding := typed[rbacv1.ClusterRoleBinding](t, with, "ClusterRoleBinding", "otelcol-gpu-remediation-repair")
	assert.Equal(t, releaseNamespace, binding.Subjects[0].Namespace)
	assert.Equal(t, "otelcol-gpu-gateway", binding.Subjects[0].Name)

	// Platform none: the loop, no Kubernetes RBAC; no CA: the system roots.
	noPlatform := helmTemplate(t, scenarioByName(t, defaultScenario), append(repairOn, "--set", "remediation.repair.agentCA.secretName=")...)
	gw = typed[appsv1.StatefulSet](t, noPlatform, "StatefulSet", "otelcol-gpu-gateway").Spec.Template.Spec.Containers[0]
	assert.NotNil(t, envVar(gw, "REMEDIATION_REPAIR"))
	assert.Nil(t, envVar(gw, "REMEDIATION_REPAIR_AGENT_CA_FILE"))
	for _, m := range gw.VolumeMounts {
		assert.NotEqual(t, "repair-agent-ca", m.Name)
	}
	for _, o := range noPlatform {
		assert.NotEqual(t, "otelcol-gpu-remediation-repair", o.GetName(), "%s: no Kubernetes platform, no repair RBAC", o.GetKind())
	}

	// The defaults: off, and the shipped config valid with it off.
	without := helmTemplate(t, scenarioByName(t, defaultScenario))
	gw = typed[appsv1.StatefulSet](t, without, "StatefulSet", "otelcol-gpu-gateway").Spec.Template.Spec.Containers[0]
	for _, name := range []string{"REMEDIATION_REPAIR", "REMEDIATION_REPAIR_AGENT_PORT", "REMEDIATION_REPAIR_PRIVATE_KEY_FILE"} {
		assert.Nil(t, envVar(gw, name), name)
	}
	for _, m := range gw.VolumeMounts {
		assert.NotEqual(t, "repair-private-key", m.Name)
	}
	cfg, err = gatewayRemediation(t, without, gw)
	require.NoError(t, err)
	assert.False(t, cfg.Repair.Enabled)

	// Refused, naming the value.
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"--set", "remediation.repair.enabled=true"}, "set agent.repair.enabled too"},
		{[]string{"--set", "remediation.repair.enabled=true", "--set", "agent.repair.enabled=true"}, "agent.repair.tls.secretName"},
		{append(repairOn, "--set", "remediation.repair.privateKey.secretName="), "remediation.repair.privateKey.secretName"},
		{append(repairOn, "--set", "remediation.repair.privateKey.secretKey="), "remediation.repair.privateKey.secretKey"},
		{append(repairOn, "--set", "remediation.repair.agentCA.secretKey="), "remediation.repair.agentCA.secretKey"},
		{[]string{"--set", "remediation.repair.enabled=yes"}, "/remediation/repair/enabled"},
	} {
		args := append([]string{"template", releaseName, chartDir, "--namespace", releaseNamespace}, tc.set...)
		assert.Contains(t, helmFails(t, args...), tc.want, tc.set)
	}
}
