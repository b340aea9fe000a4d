package distributions_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"
)

// resolveAgent resolves config.yaml and the fragments as the agent does.
func resolveAgent(t *testing.T, files ...string) *confmap.Conf {
	t.Helper()
	var uris []string
	for _, f := range files {
		uris = append(uris, "file:"+filepath.Join("agent", f))
	}
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              uris,
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		DefaultScheme:     "env",
	})
	require.NoError(t, err)
	conf, err := resolver.Resolve(context.Background())
	require.NoError(t, err)
	require.NoError(t, resolver.Shutdown(context.Background()))
	return conf
}

func repairConfig(t *testing.T, conf *confmap.Conf) *gpurepairreceiver.Config {
	t.Helper()
	sub, err := conf.Sub("receivers::gpu_repair")
	require.NoError(t, err)
	cfg := gpurepairreceiver.NewFactory().CreateDefaultConfig().(*gpurepairreceiver.Config)
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	return cfg
}

// repair.yaml merged over config.yaml: the receiver decodes and
// validates, has a pipeline of its own to Kafka, and leaves config.yaml's
// pipelines as they were (it restates no list). Without the fragment
// there is no repair endpoint.
func TestRepairFragment(t *testing.T) {
	t.Setenv("OTELCOL_GPU_HOST_NAME", "gpu-node-7")
	t.Setenv("REPAIR_PUBLIC_KEY_FILE", "/keys/gateway.pub")
	base := resolveAgent(t, "config.yaml")
	assert.False(t, base.IsSet("receivers::gpu_repair"), "the repair endpoint is opt-in")

	merged := resolveAgent(t, "config.yaml", "repair.yaml")
	cfg := repairConfig(t, merged)
	assert.Equal(t, "0.0.0.0:8790", cfg.NetAddr.Endpoint)
	assert.Equal(t, "gpu-node-7", cfg.HostName)
	assert.Equal(t, "/keys/gateway.pub", cfg.PublicKeyFile)
	assert.Equal(t, 2*time.Minute, cfg.GPUReset.Timeout)
	nodestate := component.MustNewID("nodestate")
	assert.Equal(t, &nodestate, cfg.NodeState)
	assert.False(t, cfg.TLS.HasValue())
	assert.Equal(t, gpurepairreceiver.DiagBackendCommand, cfg.Verify.Diag.Backend)
	assert.Equal(t, gpurepairreceiver.DefaultDiagCommand, cfg.Verify.Diag.Command)
	assert.Equal(t, "localhost:5555", cfg.Verify.Diag.DCGM.Endpoint)
	assert.True(t, cfg.Verify.Links.Enabled)
	assert.Equal(t, "nodestate", cfg.Verify.Links.NodeState, "links_steady and the confirmation read the node's own readings")
	assert.Contains(t, merged.Get("service::extensions"), "nodestate", "the nodestate extension the receiver reads runs")
	assert.Equal(t, []any{"gpu_repair"}, merged.Get("service::pipelines::logs/repair::receivers"))
	assert.Equal(t, []any{"kafka"}, merged.Get("service::pipelines::logs/repair::exporters"))
	for _, p := range []string{"logs", "metrics", "traces"} {
		assert.Equal(t, base.Get("service::pipelines::"+p), merged.Get("service::pipelines::"+p), p)
	}

	t.Setenv("REPAIR_DIAG_BACKEND", "dcgm")
	t.Setenv("DCGM_ENDPOINT", "unix:///run/nvidia/dcgm.sock")
	cfg = repairConfig(t, resolveAgent(t, "config.yaml", "repair.yaml"))
	assert.Equal(t, gpurepairreceiver.DiagBackendDCGM, cfg.Verify.Diag.Backend)
	assert.Equal(t, "unix:///run/nvidia/dcgm.sock", cfg.Verify.Diag.DCGM.Endpoint)

	t.Setenv("REPAIR_TLS_CERT_FILE", "/tls/tls.crt")
	t.Setenv("REPAIR_TLS_KEY_FILE", "/tls/tls.key")
	cfg = repairConfig(t, resolveAgent(t, "config.yaml", "repair.yaml", "repair-tls.yaml"))
	require.True(t, cfg.TLS.HasValue())
	assert.Equal(t, "/tls/tls.crt", cfg.TLS.Get().CertFile)
	assert.Equal(t, "/tls/tls.key", cfg.TLS.Get().KeyFile)
}
