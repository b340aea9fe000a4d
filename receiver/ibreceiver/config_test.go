package ibreceiver

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
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
	assert.Equal(t, "/sys", cfg.SysfsRoot)
	assert.Equal(t, DefaultHWCounters, cfg.HWCounters)
	assert.Len(t, cfg.HWCounters, 17)
	assert.Empty(t, cfg.Devices.Include)
	assert.Empty(t, cfg.Devices.Exclude)
	assert.Empty(t, cfg.HostName)
	assert.Equal(t, 5*time.Second, cfg.ReadTimeout)
	assert.Less(t, cfg.ReadTimeout, cfg.CollectionInterval, "a scrape ends before the next one starts")
	// A shorter collection_interval (the e2e tests' 1s) bounds the reads
	// instead of refusing the configuration.
	short := *cfg
	short.CollectionInterval = time.Second
	require.NoError(t, short.Validate())
	assert.Equal(t, time.Second, effectiveReadTimeout(&short))
	assert.Equal(t, 5*time.Second, effectiveReadTimeout(cfg))
	// The default list is a copy: changing it does not change the package variable.
	cfg.HWCounters[0] = "changed"
	assert.Equal(t, "out_of_sequence", DefaultHWCounters[0])
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	defaultCC := scraperhelper.NewDefaultControllerConfig()
	defaultCC.CollectionInterval = 10 * time.Second
	customCC := scraperhelper.NewDefaultControllerConfig()
	customCC.CollectionInterval = 30 * time.Second

	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{
			name: "",
			want: &Config{ControllerConfig: defaultCC, SysfsRoot: "/sys", Naming: NamingOTel, HWCounters: DefaultHWCounters, ReadTimeout: DefaultReadTimeout},
		},
		{
			name: "custom",
			want: &Config{
				ControllerConfig: customCC,
				SysfsRoot:        "/host/sys",
				Devices:          DeviceFilter{Include: []string{"mlx5_0", "mlx5_1"}, Exclude: []string{"mlx5_2"}},
				HWCounters:       []string{"*"},
				HostName:         "node-7",
				Naming:           NamingOTel,
				ReadTimeout:      2 * time.Second,
			},
		},
		{
			name: "metrics_off",
			want: &Config{
				ControllerConfig: defaultCC, SysfsRoot: "/sys", Naming: NamingOTel, HWCounters: DefaultHWCounters, ReadTimeout: DefaultReadTimeout,
				Metrics: map[string]MetricConfig{"ib.port.xmit_wait": {Enabled: false}},
			},
		},
		{name: "unknown_metric", wantErr: `metrics::ib_port_xmit_wait_total: not a metric of this receiver (one of hw.errors, hw.network.io,`},
		{name: "metrics_node_exporter", wantErr: `metrics: applies to naming "otel" only`},
		{name: "empty_sysfs_root", wantErr: "sysfs_root must not be empty"},
		{name: "zero_interval", wantErr: `collection_interval: 0s is under the 100ms floor`},
		{name: "include_and_exclude", wantErr: `devices: "mlx5_1" is in both include and exclude`},
		{name: "empty_hw_counter", wantErr: "hw_counters[1] must not be empty"},
		{name: "star_not_alone", wantErr: `hw_counters[0]: "*" must be the only entry`},
		{name: "hw_counter_path", wantErr: `hw_counters[0]: "../counters/symbol_error" is not a file name`},
		{name: "empty_device", wantErr: "devices::exclude[0] must not be empty"},
		{name: "zero_read_timeout", wantErr: `read_timeout must be greater than 0, got "0s"`},
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
