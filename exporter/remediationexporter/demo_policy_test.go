package remediationexporter

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
)

// TestDemoRepairPolicy keeps the demo's repair loop fragment
// (cmd/demo/gateway-repair.yaml) valid and its rules equal to the shipped
// ones plus the demo's one rule, demo_p2_nvlink, just before p2: a list
// replaces the shipped rules as a whole, so the fragment carries a copy.
func TestDemoRepairPolicy(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("..", "..", "cmd", "demo", "gateway-repair.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub("exporters::remediation")
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	assert.True(t, cfg.DryRun, "the demo's loop is a dry run")
	assert.True(t, cfg.Repair.Enabled)
	assert.Equal(t, time.Second, cfg.Repair.PollInterval)

	rules := cfg.Policy.Rules
	i := slices.IndexFunc(rules, func(r policy.Rule) bool { return r.Name == "demo_p2_nvlink" })
	require.GreaterOrEqual(t, i, 0, "the demo's rule")
	demo := rules[i]
	assert.Equal(t, []string{"P2"}, demo.Severities)
	assert.Equal(t, []string{"nvlink.degraded"}, demo.Types)
	assert.Equal(t, []string{"gpu_reset", "reboot"}, demo.Repair)
	require.Less(t, i+1, len(rules))
	assert.Equal(t, "p2", rules[i+1].Name, "the demo's rule comes just before p2")
	assert.Equal(t, policy.DefaultRules(), slices.Delete(slices.Clone(rules), i, i+1),
		"the fragment's other rules are the shipped ones (internal/policy DefaultRules)")
}
