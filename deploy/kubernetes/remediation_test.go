package kubernetes

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"
)

// TestProductionRemediationConfig loads the production values' remediation
// config fragment (the chart's ConfigMap otelcol-gpu-gateway-remediation)
// the way the collector merges it into the remediation exporter's config,
// validates it, and checks that its Lease and breaker ConfigMap are where
// the chart's Role (deploy/rbac/role.yaml) lets the gateway write them.
func TestProductionRemediationConfig(t *testing.T) {
	cfg, objs := remediationFragment(t, productionScenario, "remediation-kubernetes.yaml")
	assert.True(t, cfg.Kubernetes.Enabled, "the production values act through Kubernetes")
	assert.Empty(t, cfg.Kubernetes.Kubeconfig, "in-cluster service account")

	role := typed[rbacv1.Role](t, objs, "Role", "otelcol-gpu-remediation")
	binding := typed[rbacv1.RoleBinding](t, objs, "RoleBinding", "otelcol-gpu-remediation")
	assert.Equal(t, role.Name, binding.RoleRef.Name)
	sts := typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway")
	assert.True(t, slices.ContainsFunc(binding.Subjects, func(s rbacv1.Subject) bool {
		return s.Kind == "ServiceAccount" && s.Name == sts.Spec.Template.Spec.ServiceAccountName && s.Namespace == sts.Namespace
	}), "the Role is bound to the gateway's service account")
	assert.Equal(t, role.Namespace, cfg.Kubernetes.Lease.Namespace, "lease namespace")
	assert.Equal(t, role.Namespace, cfg.Kubernetes.Breaker.Namespace, "breaker namespace")
	assert.True(t, grants(role.Rules, "coordination.k8s.io", "leases", "get", "create", "update"), "Role must allow the Lease")
	assert.True(t, grants(role.Rules, "", "configmaps", "get", "create", "update"), "Role must allow the breaker ConfigMap")

	// The names the exporter defaults to: the fragment states them, and a
	// single-replica gateway without the fragment uses the same ones.
	def, ok := remediationexporter.NewFactory().CreateDefaultConfig().(*remediationexporter.Config)
	require.True(t, ok)
	assert.Equal(t, def.Kubernetes.Lease.Name, cfg.Kubernetes.Lease.Name)
	assert.Equal(t, def.Kubernetes.Lease.Namespace, cfg.Kubernetes.Lease.Namespace)
	assert.Equal(t, def.Kubernetes.Breaker.Name, cfg.Kubernetes.Breaker.Name)
}

func grants(rules []rbacv1.PolicyRule, group, resource string, verbs ...string) bool {
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, group) || !slices.Contains(r.Resources, resource) {
			continue
		}
		if !slices.ContainsFunc(verbs, func(v string) bool { return !slices.Contains(r.Verbs, v) }) {
			return true
		}
	}
	return false
}

// remediationFragment renders the chart for scenario with args and loads
// the remediation ConfigMap's file as the exporter would merge it.
func remediationFragment(t *testing.T, scenario, file string, args ...string) (*remediationexporter.Config, []*unstructured.Unstructured) {
	t.Helper()
	objs := helmTemplate(t, scenarioByName(t, scenario), args...)
	cm := typed[corev1.ConfigMap](t, objs, "ConfigMap", "otelcol-gpu-gateway-remediation")
	b, ok := cm.Data[file]
	require.True(t, ok, "ConfigMap %s has no %s", cm.Name, file)
	var raw map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(b), &raw))
	sub, err := confmap.NewFromStringMap(raw).Sub("exporters::remediation")
	require.NoError(t, err)
	cfg, ok := remediationexporter.NewFactory().CreateDefaultConfig().(*remediationexporter.Config)
	require.True(t, ok)
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	sts := typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway")
	assert.Contains(t, sts.Spec.Template.Spec.Containers[0].Args, "--config=/etc/otelcol-gpu-remediation/"+file)
	return cfg, objs
}

// TestSlurmRemediationValues: remediation.platform slurm merges a Slurm
// section that the exporter accepts, with slurmrestd's token from a Secret.
func TestSlurmRemediationValues(t *testing.T) {
	cfg, objs := remediationFragment(t, defaultScenario, "remediation-slurm.yaml",
		"--set", "remediation.platform=slurm", "--set", "remediation.slurm.restURL=https://slurmrestd.slurm.svc:6820")
	assert.True(t, cfg.Slurm.Enabled)
	assert.False(t, cfg.Kubernetes.Enabled)
	assert.Equal(t, "https://slurmrestd.slurm.svc:6820", cfg.Slurm.Slurmrestd.URL)
	gw := typed[appsv1.StatefulSet](t, objs, "StatefulSet", "otelcol-gpu-gateway").Spec.Template.Spec.Containers[0]
	jwt := envVar(gw, "SLURM_JWT")
	if assert.NotNil(t, jwt, "SLURM_JWT") && assert.NotNil(t, jwt.ValueFrom) {
		assert.Equal(t, "otelcol-gpu-slurm-jwt", jwt.ValueFrom.SecretKeyRef.Name)
	}

	// Without slurmrestd's URL the chart refuses to render.
	cmd := exec.Command(helmBin(t), "template", releaseName, chartDir, "--set", "remediation.platform=slurm")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "remediation.slurm.restURL")
}

// TestEvictionValues: eviction turns on the exporter's evict action and
// binds deploy/rbac/eviction's ClusterRole, which only then exists.
func TestEvictionValues(t *testing.T) {
	cfg, objs := remediationFragment(t, defaultScenario, "remediation-kubernetes.yaml",
		"--set", "remediation.platform=kubernetes", "--set", "remediation.kubernetes.evict=true")
	assert.True(t, cfg.Kubernetes.Evict)
	role := typed[rbacv1.ClusterRole](t, objs, "ClusterRole", "otelcol-gpu-remediation-eviction")
	assert.True(t, grants(role.Rules, "", "pods/eviction", "create"))
	binding := typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "otelcol-gpu-remediation-eviction")
	assert.Equal(t, releaseNamespace, binding.Subjects[0].Namespace)

	for _, o := range helmTemplate(t, scenarioByName(t, productionScenario)) {
		assert.NotEqual(t, "otelcol-gpu-remediation-eviction", o.GetName(), "%s: eviction is off unless asked for", o.GetKind())
	}
}

// TestRepairValues: kubernetes.repair nvsentinel turns on the exporter's
// RebootNode/GPUReset repairs and binds deploy/rbac/repair's ClusterRole,
// which only then exists.
func TestRepairValues(t *testing.T) {
	cfg, objs := remediationFragment(t, defaultScenario, "remediation-kubernetes.yaml",
		"--set", "remediation.platform=kubernetes", "--set", "remediation.kubernetes.repair=nvsentinel")
	assert.Equal(t, "nvsentinel", cfg.Kubernetes.Repair)
	role := typed[rbacv1.ClusterRole](t, objs, "ClusterRole", "otelcol-gpu-remediation-repair")
	assert.True(t, grants(role.Rules, "janitor.dgxc.nvidia.com", "rebootnodes", "create"))
	assert.True(t, grants(role.Rules, "janitor.dgxc.nvidia.com", "gpuresets", "get"))
	assert.True(t, grants(role.Rules, "", "pods", "list"))
	assert.False(t, grants(role.Rules, "janitor.dgxc.nvidia.com", "rebootnodes", "delete"))
	binding := typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "otelcol-gpu-remediation-repair")
	assert.Equal(t, releaseNamespace, binding.Subjects[0].Namespace)

	for _, o := range helmTemplate(t, scenarioByName(t, productionScenario)) {
		assert.NotEqual(t, "otelcol-gpu-remediation-repair", o.GetName(), "%s: repair is off unless asked for", o.GetKind())
	}
}
