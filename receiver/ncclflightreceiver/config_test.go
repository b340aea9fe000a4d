package ncclflightreceiver

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

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
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

func TestConfig(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(createDefaultConfig()))
	cfg := loadConfig(t, "")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, []string{"*nccl_trace_rank_*", "*comm_lib_trace_rank_*", "*_dump_*"}, cfg.FlightRecorder.Patterns)
	assert.Equal(t, -1, cfg.FlightRecorder.Rank)
	assert.Equal(t, 2*time.Minute, cfg.FlightRecorder.IncompleteAfter)
	assert.Equal(t, time.Minute, cfg.FlightRecorder.StallAfter)
	assert.Equal(t, analysis.DefaultOptions().StallAfter, cfg.FlightRecorder.StallAfter)
	assert.Empty(t, cfg.RAS.Endpoint, "RAS is off by default")

	cfg = loadConfig(t, "all")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "llama-70b", cfg.JobID)
	assert.Equal(t, "xl003", cfg.HostName)
	assert.Equal(t, "file_storage/ncclflight", cfg.Storage.String())
	assert.Equal(t, 3, cfg.FlightRecorder.Rank)
	assert.Equal(t, int64(1048576), cfg.FlightRecorder.MaxFileSize)
	assert.Equal(t, 30*time.Second, cfg.FlightRecorder.StallAfter)
	assert.Equal(t, []string{"/var/run/nccl-inspector"}, cfg.Inspector.Directories)
	assert.Equal(t, time.Minute, cfg.RAS.Interval)
}

func TestInvalidConfig(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "no_input"))
	assert.ErrorContains(t, err, "no input")
	err = confmap.Validate(loadConfig(t, "bad"))
	for _, want := range []string{
		`flight_recorder::patterns[0]: "[" is not a valid pattern`,
		`flight_recorder::patterns[1]`,
		"flight_recorder::rank: -7",
		"flight_recorder::settle_time: must be greater than 0",
		"flight_recorder::stall_after: must be greater than 0, got -1s",
		"flight_recorder::max_file_size",
		`ras::endpoint: "localhost" is not host:port`,
	} {
		assert.ErrorContains(t, err, want)
	}
}
