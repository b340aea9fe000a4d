package distributions_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"
)

// remediationConfig resolves the gateway's config.yaml as the gateway
// does and decodes the remediation exporter; the error is its Validate's.
func remediationConfig(t *testing.T) (*remediationexporter.Config, error) {
	t.Helper()
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"file:" + filepath.Join("gateway", "config.yaml")},
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

// The gateway's repair section: off by default (and valid so), set from
// the REMEDIATION_REPAIR* variables the Helm chart sets from
// remediation.repair.*; on, acting (dry_run false) and without the
// private key, the gateway refuses to start naming the key.
func TestGatewayRepairConfig(t *testing.T) {
	cfg, err := remediationConfig(t)
	require.NoError(t, err)
	assert.False(t, cfg.Repair.Enabled, "the repair loop is opt-in")
	assert.True(t, cfg.DryRun)
	assert.Equal(t, "https://{node}:8790", cfg.Repair.Agent.Endpoint)
	assert.Empty(t, cfg.Repair.Agent.PrivateKeyFile)
	assert.Empty(t, cfg.Repair.Agent.TLS.CAFile)
	assert.True(t, cfg.Repair.RequireConfirmation, "the exporter's defaults stand where the file says nothing")
	assert.Equal(t, 10*time.Second, cfg.Repair.PollInterval)

	t.Setenv("REMEDIATION_REPAIR", "true")
	t.Setenv("REMEDIATION_REPAIR_AGENT_PORT", "9790")
	t.Setenv("REMEDIATION_REPAIR_PRIVATE_KEY_FILE", "/etc/otelcol-gpu-repair/gateway.key")
	t.Setenv("REMEDIATION_REPAIR_AGENT_CA_FILE", "/etc/otelcol-gpu-repair-ca/ca.crt")
	t.Setenv("REMEDIATION_DRY_RUN", "false")
	cfg, err = remediationConfig(t)
	require.NoError(t, err)
	assert.True(t, cfg.Repair.Enabled)
	assert.False(t, cfg.DryRun)
	assert.Equal(t, "https://{node}:9790", cfg.Repair.Agent.Endpoint)
	assert.Equal(t, "/etc/otelcol-gpu-repair/gateway.key", cfg.Repair.Agent.PrivateKeyFile)
	assert.Equal(t, "/etc/otelcol-gpu-repair-ca/ca.crt", cfg.Repair.Agent.TLS.CAFile)

	// No key: refused, naming it.
	t.Setenv("REMEDIATION_REPAIR_PRIVATE_KEY_FILE", "")
	_, err = remediationConfig(t)
	require.Error(t, err)
	assert.ErrorContains(t, err, "repair.agent.private_key_file")

	// No key in dry run: it starts, and signs nothing.
	t.Setenv("REMEDIATION_DRY_RUN", "true")
	_, err = remediationConfig(t)
	require.NoError(t, err)
}
