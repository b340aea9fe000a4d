package gpurepairreceiver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelDevelopment, f.LogsStability())
	_, err := createLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), &struct{}{}, consumertest.NewNop(), factoryOptions{})
	require.ErrorIs(t, err, errConfigNotRepair)
}

// The production factory starts (the NVML seam is lazy: nothing is called
// until a request) and stops; Shutdown before Start is fine.
func TestStartShutdownProduction(t *testing.T) {
	dir := t.TempDir()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.HostName = testNode
	cfg.PublicKeyFile = writePublicKey(t, dir, testKey(1))
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Shutdown(context.Background()), "before Start")
	require.NoError(t, r.Start(context.Background(), nodestateHost(nodestate.NewMemoryStore(nodestate.DefaultLimits()))))
	require.NoError(t, r.Shutdown(context.Background()))
}

// Start fails, naming the cause, when the key, the node or the
// nodestate extension is missing: never a repair endpoint that cannot
// check what it is asked.
func TestStartFailures(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pub")
	require.NoError(t, os.WriteFile(garbage, []byte("not a key"), 0o600))
	good := writePublicKey(t, dir, testKey(1))
	ns := component.MustNewIDWithName("nodestate", "other")
	for name, c := range map[string]struct {
		set  func(*Config)
		want string
	}{
		"missing key":   {func(c *Config) { c.PublicKeyFile = filepath.Join(dir, "nope.pub") }, "nope.pub"},
		"garbage key":   {func(c *Config) { c.PublicKeyFile = garbage }, "garbage.pub"},
		"bad node name": {func(c *Config) { c.HostName = "node/a" }, "host_name"},
		"no nodestate":  {func(c *Config) { c.NodeState = &ns }, "nodestate"},
		"no verify::links::nodestate": {func(c *Config) { c.Verify.Links.NodeState = "nodestate/missing" },
			`verify::links::nodestate: extension "nodestate/missing" is not configured`},
		"links disabled, nodestate still resolved": {func(c *Config) {
			c.Verify.Links.Enabled = false
			c.Verify.Links.NodeState = "nodestate/missing"
		}, "verify::links::nodestate"},
		"bad diag command": {func(c *Config) { c.Verify.Diag.Command = []string{"dcgmi", "{level}", "{gpus}", "{uuid}"} }, "unknown placeholder"},
		"bad endpoint":     {func(c *Config) { c.NetAddr.Endpoint = "256.0.0.1:1" }, "endpoint"},
	} {
		cfg := NewFactory().CreateDefaultConfig().(*Config)
		cfg.NetAddr.Endpoint = "127.0.0.1:0"
		cfg.HostName = testNode
		cfg.PublicKeyFile = good
		c.set(cfg)
		r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
		require.NoError(t, err)
		err = r.Start(context.Background(), nodestateHost(nodestate.NewMemoryStore(nodestate.DefaultLimits())))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
		require.NoError(t, r.Shutdown(context.Background()))
	}
}
