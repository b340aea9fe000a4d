package ratelimitprocessor

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor/internal/metadata"
)

// loadConfig unmarshals testdata/config.yaml's ratelimit/<name> over the
// default config, as the collector does.
func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestDefaultConfig(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(createDefaultConfig()))
	cfg := loadConfig(t, "")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, createDefaultConfig(), cfg)
	assert.Equal(t, 10_000, cfg.MaxKeys)
	assert.True(t, cfg.Traces.Enabled)
	assert.Equal(t, "training.job.id", cfg.Traces.Key)
	assert.InDelta(t, 100_000, cfg.Traces.SpansPerSecond, 0)
	assert.Equal(t, 200_000, cfg.Traces.Burst)
	assert.True(t, cfg.Logs.Enabled)
	assert.Equal(t, "host.name", cfg.Logs.Key)
	assert.InDelta(t, 200, cfg.Logs.RecordsPerSecond, 0)
	assert.Equal(t, 1000, cfg.Logs.Burst)
	assert.Equal(t, "INFO", cfg.Logs.MaxSeverity)
	assert.Equal(t, 10_000, cfg.Traces.ProtectedReserve)
	assert.Equal(t, 1000, cfg.Logs.ProtectedReserve)
	assert.True(t, cfg.Traces.PerNode.Enabled)
	assert.Equal(t, "host.name", cfg.Traces.PerNode.Key)
	assert.InDelta(t, 200_000, cfg.Traces.PerNode.SpansPerSecond, 0)
	assert.Equal(t, 400_000, cfg.Traces.PerNode.Burst)
	sev, ok := cfg.Logs.maxSeverityNumber()
	require.True(t, ok)
	assert.Equal(t, plog.SeverityNumberInfo4, sev, "INFO covers INFO to INFO4")
}

func TestFullConfig(t *testing.T) {
	cfg := loadConfig(t, "full")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, 500, cfg.MaxKeys)
	assert.Equal(t, "k8s.pod.name", cfg.Traces.Key)
	assert.InDelta(t, 5000, cfg.Traces.SpansPerSecond, 0)
	assert.Equal(t, 12000, cfg.Traces.Burst)
	assert.Equal(t, 300, cfg.Traces.ProtectedReserve)
	assert.Equal(t, "k8s.node.name", cfg.Traces.PerNode.Key)
	assert.InDelta(t, 8000, cfg.Traces.PerNode.SpansPerSecond, 0)
	assert.Equal(t, 30000, cfg.Traces.PerNode.Burst)
	assert.Equal(t, 0, cfg.Logs.ProtectedReserve)
	assert.Equal(t, "k8s.node.name", cfg.Logs.Key)
	assert.InDelta(t, 0.5, cfg.Logs.RecordsPerSecond, 0)
	assert.Equal(t, 20, cfg.Logs.Burst)
	sev, ok := cfg.Logs.maxSeverityNumber()
	require.True(t, ok, "names are case-insensitive")
	assert.Equal(t, plog.SeverityNumberDebug4, sev)
}

func TestDisabledSectionIsNotChecked(t *testing.T) {
	cfg := loadConfig(t, "logs_only")
	require.NoError(t, confmap.Validate(cfg))
	assert.False(t, cfg.Traces.Enabled)
	assert.True(t, cfg.Logs.Enabled)
}

func TestInvalidConfigNamesEveryKey(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "invalid"))
	require.Error(t, err)
	for _, want := range []string{
		"max_keys: must be greater than 0, got 0",
		"traces::key: must not be empty",
		"traces::spans_per_second: must be a finite number greater than 0, got -1",
		"traces::burst: must be at least 1, got 0",
		"logs::records_per_second: must be a finite number greater than 0, got 0",
		"logs::burst: must be at least 1, got -5",
		`logs::max_severity: must be one of TRACE, DEBUG, INFO (or TRACE2..INFO4); WARN and above are never limited; got "WARN"`,
		"traces::protected_reserve: must be 0 or more, got -1",
		"traces::per_node::key: must not be empty",
		"traces::per_node::spans_per_second: must be a finite number greater than 0, got +Inf",
		"traces::per_node::burst: must be at least 1, got -2",
		"logs::protected_reserve: must be 0 or more, got -7",
	} {
		assert.ErrorContains(t, err, want)
	}
}

func TestDisabledNodeBudgetIsNotChecked(t *testing.T) {
	cfg := loadConfig(t, "no_per_node")
	require.NoError(t, confmap.Validate(cfg))
	assert.False(t, cfg.Traces.PerNode.Enabled)
	p, err := newTracesProcessor(cfg, newHarness(t).set, new(consumertest.TracesSink))
	require.NoError(t, err)
	assert.Nil(t, p.lim.node)
}

func TestUnknownSeverityRejected(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "unknown_severity"))
	assert.ErrorContains(t, err, `logs::max_severity`)
	assert.ErrorContains(t, err, `got "chatty"`)
}

func TestValidateRejectsEachBadValue(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"spans_per_second zero":  {func(c *Config) { c.Traces.SpansPerSecond = 0 }, "traces::spans_per_second"},
		"spans_per_second NaN":   {func(c *Config) { c.Traces.SpansPerSecond = math.NaN() }, "traces::spans_per_second"},
		"spans_per_second +Inf":  {func(c *Config) { c.Traces.SpansPerSecond = math.Inf(1) }, "traces::spans_per_second"},
		"traces burst negative":  {func(c *Config) { c.Traces.Burst = -1 }, "traces::burst"},
		"traces key blank":       {func(c *Config) { c.Traces.Key = "  " }, "traces::key"},
		"records_per_second neg": {func(c *Config) { c.Logs.RecordsPerSecond = -0.1 }, "logs::records_per_second"},
		"logs burst zero":        {func(c *Config) { c.Logs.Burst = 0 }, "logs::burst"},
		"logs key empty":         {func(c *Config) { c.Logs.Key = "" }, "logs::key"},
		"max_severity ERROR":     {func(c *Config) { c.Logs.MaxSeverity = "ERROR" }, "logs::max_severity"},
		"max_severity empty":     {func(c *Config) { c.Logs.MaxSeverity = "" }, "logs::max_severity"},
		"max_keys negative":      {func(c *Config) { c.MaxKeys = -3 }, "max_keys"},
		"per_node rate NaN":      {func(c *Config) { c.Traces.PerNode.SpansPerSecond = math.NaN() }, "traces::per_node::spans_per_second"},
		"per_node burst zero":    {func(c *Config) { c.Traces.PerNode.Burst = 0 }, "traces::per_node::burst"},
		"per_node key empty":     {func(c *Config) { c.Traces.PerNode.Key = "" }, "traces::per_node::key"},
		"traces reserve neg":     {func(c *Config) { c.Traces.ProtectedReserve = -1 }, "traces::protected_reserve"},
		"logs reserve neg":       {func(c *Config) { c.Logs.ProtectedReserve = -1 }, "logs::protected_reserve"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tc.mutate(cfg)
			assert.ErrorContains(t, cfg.Validate(), tc.want)
		})
	}
}
