package kubernetes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"
)

// TestProductionRemediationConfig loads the production overlay's config
// fragment the way the collector merges it into the remediation exporter's
// config, validates it, and checks that its Lease and breaker ConfigMap are
// where deploy/rbac's Role lets the gateway write them.
func TestProductionRemediationConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("overlays", "production", "remediation-kubernetes.yaml"))
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, yaml.Unmarshal(b, &raw))
	sub, err := confmap.NewFromStringMap(raw).Sub("exporters::remediation")
	require.NoError(t, err)

	cfg, ok := remediationexporter.NewFactory().CreateDefaultConfig().(*remediationexporter.Config)
	require.True(t, ok)
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	assert.True(t, cfg.Kubernetes.Enabled, "the production overlay acts through Kubernetes")
	assert.Empty(t, cfg.Kubernetes.Kubeconfig, "in-cluster service account")

	b, err = os.ReadFile(filepath.Join(repoRoot, "deploy", "rbac", "role.yaml"))
	require.NoError(t, err)
	var role rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict(b, &role))
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
