package faultconsoleextension

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	assert.Equal(t, "localhost:8787", cfg.Endpoint)
	assert.Equal(t, 10000, cfg.MaxFaults)
	assert.Equal(t, 24*time.Hour, cfg.ResolvedRetention)
	assert.Equal(t, 64, cfg.MaxJobs)
	assert.Equal(t, 120, cfg.HeatmapSteps)
	assert.Equal(t, 16384, cfg.MaxRanks)
	assert.Equal(t, ForwardConfig{Timeout: 40 * time.Second}, cfg.Forward, "a standby refuses controls unless forwarding is on")
	// token_file has no default: the default configuration is incomplete.
	require.ErrorContains(t, cfg.Validate(), "token_file is required")
	cfg.TokenFile = "testdata/token"
	require.NoError(t, cfg.Validate())
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	withToken := createDefaultConfig().(*Config)
	withToken.TokenFile = "/etc/otelcol-gpu/console-token"
	// Plain HTTP on one address (not every one) is accepted, with a warning
	// at Start off loopback.
	plainOneAddress := createDefaultConfig().(*Config)
	plainOneAddress.TokenFile, plainOneAddress.Endpoint = "t", "10.1.2.3:8787"
	// Forwarding off: its other keys are not checked.
	forwardOff := createDefaultConfig().(*Config)
	forwardOff.TokenFile, forwardOff.Forward.Timeout = "t", 0

	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{name: "", want: withToken},
		{
			name: "custom",
			want: &Config{
				Endpoint: "0.0.0.0:9999", TokenFile: "/etc/otelcol-gpu/console-token",
				TLS: &configtls.ServerConfig{Config: configtls.Config{CertFile: "/etc/otelcol-gpu/console-tls/tls.crt",
					KeyFile: "/etc/otelcol-gpu/console-tls/tls.key", ReloadInterval: time.Hour}},
				TraceURL: "http://tempo:3200/trace/{trace_id}", LogsURL: "http://loki:3100/explore?fault={fault_id}",
				MaxFaults: 100, ResolvedRetention: time.Hour, MaxJobs: 4, HeatmapSteps: 30, MaxRanks: 128, MaxHeatmapCells: 1 << 20,
				Forward: ForwardConfig{Enabled: true, Timeout: 20 * time.Second,
					TLS: configtls.ClientConfig{Config: configtls.Config{CAFile: "/etc/otelcol-gpu/console-ca/ca.crt"}}},
			},
		},
		{name: "no_token_file", wantErr: "token_file is required"},
		{name: "bad_endpoint", wantErr: `endpoint must be host:port, got "localhost"`},
		{name: "bad_port", wantErr: `endpoint "localhost:99999": port "99999" is not a number from 0 to 65535`},
		{name: "trace_url_without_placeholder", wantErr: `trace_url "http://tempo:3200/trace/" must contain {trace_id}`},
		{name: "logs_url_not_http", wantErr: `logs_url "ftp://logs/{fault_id}" must be an http:// or https:// URL`},
		{name: "zero_retention", wantErr: `resolved_retention must be greater than 0, got "0s"`},
		{name: "no_faults", wantErr: "max_faults must be at least 1, got 0"},
		{name: "no_jobs", wantErr: "max_jobs must be at least 1, got 0"},
		{name: "no_steps", wantErr: "heatmap_steps must be at least 1, got 0"},
		{name: "negative_ranks", wantErr: "max_ranks must be at least 1, got -1"},
		{name: "no_cells", wantErr: "max_heatmap_cells must be at least 1, got 0"},
		{name: "plain_every_address", wantErr: `endpoint "0.0.0.0:8787" listens on every address of the machine over plain HTTP: set tls (cert_file, key_file), or listen on localhost or one address`},
		{name: "plain_no_host", wantErr: `endpoint ":8787" listens on every address of the machine over plain HTTP`},
		{name: "tls_without_key", wantErr: "tls::config: TLS configuration must include both certificate and key"},
		{name: "plain_one_address", want: plainOneAddress},
		{name: "forward_no_ca", wantErr: "forward::tls::ca_file (or ca_pem) is required with forward::enabled"},
		{name: "forward_off_no_ca", want: forwardOff},
		{name: "forward_unverified", wantErr: "forward::tls::insecure_skip_verify: true is refused"},
		{name: "forward_system_roots", wantErr: "forward::tls::include_system_ca_certs_pool: true is refused"},
		{name: "forward_plain", wantErr: "forward::tls::insecure: true is refused"},
		{name: "forward_long_timeout", wantErr: `forward::timeout must be above 0 and at most 55s, got "2m0s"`},
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
