package nodestateextension

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

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 10*time.Minute, cfg.Retention)
	assert.Equal(t, 64, cfg.MaxGPUs)
	assert.Equal(t, 64, cfg.MaxIBPorts)
	assert.Equal(t, 600, cfg.MaxSamplesPerSeries)
	assert.Equal(t, 256, cfg.MaxXIDEventsPerGPU)
	assert.Equal(t, nodestate.DefaultLimits(), cfg.limits())
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{name: "", want: createDefaultConfig().(*Config)},
		{
			name: "custom",
			want: &Config{Retention: 2 * time.Minute, MaxGPUs: 16, MaxIBPorts: 8, MaxSamplesPerSeries: 120, MaxXIDEventsPerGPU: 32},
		},
		{name: "zero_retention", wantErr: `retention must be greater than 0, got "0s"`},
		{name: "one_sample", wantErr: "max_samples_per_series must be at least 2, got 1"},
		{name: "no_gpus", wantErr: "max_gpus must be at least 1, got 0"},
		{name: "negative_ports", wantErr: "max_ib_ports must be at least 1, got -1"},
		{name: "no_xid_events", wantErr: "max_xid_events_per_gpu must be at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}
