package stepmetricsconnector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestConfigDefaults(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(createDefaultConfig()))
	cfg := loadConfig(t, "")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, 10*time.Second, cfg.Interval)
	assert.Equal(t, 30*time.Second, cfg.StepTimeout)
	assert.Equal(t, 15*time.Minute, cfg.JobExpiry)
	assert.Equal(t, 1024, cfg.MaxJobs)
	assert.Equal(t, 32, cfg.MaxOpenSteps)
	assert.Equal(t, 65536, cfg.MaxRanks)
	assert.Equal(t, 100*time.Millisecond, cfg.Buckets[0])
	assert.Equal(t, 60*time.Second, cfg.Buckets[len(cfg.Buckets)-1])
	assert.Empty(t, cfg.PeakFLOPS)
}

func TestConfigAll(t *testing.T) {
	cfg := loadConfig(t, "all")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, 30*time.Second, cfg.Interval)
	assert.Equal(t, time.Minute, cfg.StepTimeout)
	assert.Equal(t, time.Hour, cfg.JobExpiry)
	assert.Equal(t, 64, cfg.MaxJobs)
	assert.Equal(t, 8, cfg.MaxOpenSteps)
	assert.Equal(t, 16384, cfg.MaxRanks)
	assert.Equal(t, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}, cfg.Buckets)
	assert.Equal(t, map[string]float64{"H100 NVL": 835e12, "MI300X": 1307.4e12}, cfg.PeakFLOPS)
}

func TestConfigInvalid(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad"))
	require.Error(t, err)
	for _, want := range []string{
		"interval: 0s is under the 100ms floor",
		"step_timeout: must be greater than 0, got -1s",
		"job_expiry: must be greater than 0",
		"max_jobs: must be greater than 0, got 0",
		"max_open_steps: must be greater than 0, got -2",
		"max_ranks: must be at most 1048576, got 2000000",
		"buckets[1]: 500ms must be greater than the previous bound 1s",
		"buckets[2]: must be greater than 0, got 0s",
		"peak_flops: a GPU model key is empty",
		"peak_flops::X1: must be a finite number greater than 0, got -5",
	} {
		assert.ErrorContains(t, err, want)
	}
	assert.ErrorContains(t, confmap.Validate(loadConfig(t, "no_buckets")), "buckets: must not be empty")

	cfg := createDefaultConfig().(*Config)
	cfg.Buckets = make([]time.Duration, maxBuckets+1)
	for i := range cfg.Buckets {
		cfg.Buckets[i] = time.Duration(i+1) * time.Second
	}
	assert.ErrorContains(t, cfg.Validate(), "buckets: at most 64, got 65")
}
