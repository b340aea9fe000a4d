package dcgmreceiver

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

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
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

func TestDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, SourceDCGM, cfg.Source)
	assert.Equal(t, ModeStandalone, cfg.Mode)
	assert.Equal(t, "localhost:5555", cfg.Endpoint)
	assert.Equal(t, NamingOTel, cfg.Naming)
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
	assert.Equal(t, 30*time.Second, cfg.ProfilingInterval)
	assert.False(t, cfg.KMsg)
}

func TestLoadConfig(t *testing.T) {
	cfg := loadConfig(t, "exporter")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, SourceExporter, cfg.Source)
	assert.Equal(t, NamingDCGMExporter, cfg.Naming)
	assert.Equal(t, 15*time.Second, cfg.CollectionInterval)
	assert.Zero(t, cfg.ProfilingInterval)

	cfg = loadConfig(t, "full")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, ModeEmbedded, cfg.Mode)
	assert.True(t, cfg.KMsg)
	assert.Equal(t, "/host/dev/kmsg", cfg.KMsgPath)
	assert.Equal(t, time.Minute, cfg.Attribution.RefreshInterval)
	assert.True(t, cfg.Attribution.Kubernetes.Enabled)
	assert.Equal(t, defaultPodResourcesSocket, cfg.Attribution.Kubernetes.Socket)
	assert.Equal(t, "/var/run/dcgm-job-mapping", cfg.Attribution.Slurm.JobMappingDir)
	require.Len(t, cfg.XIDCatalogue, 1)
	assert.Equal(t, 149, cfg.XIDCatalogue[0].Code)
}

func TestInvalidConfigs(t *testing.T) {
	for name, wants := range map[string][]string{
		"bad_source":            {`source: "rocm" is not one of dcgm, nvml, exporter`},
		"bad_exporter_endpoint": {`endpoint: "localhost:9400" is not an http(s) URL`},
		"bad_values": {
			`mode: "both"`,
			`naming: "prometheus"`,
			"collection_interval: 0s is under the 100ms floor",
			"profiling_interval: must not be negative",
			"call_timeout: must be greater than 0",
			"xid_catalogue: [0] (code 0): severity",
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := confmap.Validate(loadConfig(t, name))
			require.Error(t, err)
			for _, want := range wants {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}
