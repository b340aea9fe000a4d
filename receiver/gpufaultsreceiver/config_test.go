package gpufaultsreceiver

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

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, semconv.TopicFaults, cfg.Topic)
	assert.Equal(t, semconv.GroupRemediation, cfg.GroupID)
	assert.Equal(t, 10*time.Second, cfg.SessionTimeout)
	assert.Equal(t, "earliest", cfg.InitialOffset)
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	load := func(t *testing.T, name string) *Config {
		sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
		require.NoError(t, err)
		cfg := createDefaultConfig().(*Config)
		require.NoError(t, sub.Unmarshal(cfg, confmap.WithIgnoreUnused()))
		return cfg
	}

	require.NoError(t, confmap.Validate(load(t, "")))

	custom := load(t, "custom")
	require.NoError(t, confmap.Validate(custom))
	assert.Equal(t, []string{"kafka-0:9093", "kafka-1:9093"}, custom.Brokers)
	assert.Equal(t, "gateway-0", custom.ClientID)
	assert.Equal(t, "faults", custom.Topic)
	assert.Equal(t, "remediators", custom.GroupID)
	assert.Equal(t, 30*time.Second, custom.SessionTimeout)
	assert.Equal(t, 3*time.Second, custom.HeartbeatInterval)
	assert.Equal(t, "latest", custom.InitialOffset)
	assert.Equal(t, RetryBackoff{InitialInterval: time.Second, MaxInterval: time.Minute}, custom.RetryBackoff)
	require.NotNil(t, custom.Authentication.SASL)
	assert.Equal(t, "SCRAM-SHA-512", custom.Authentication.SASL.Mechanism)
	require.NotNil(t, custom.TLS)
	assert.Equal(t, "/etc/kafka/ca.pem", custom.TLS.CAFile)
	assert.Equal(t, "otelcol-gpu-gateway-0", custom.MemberName)
	assert.Equal(t, "https://otelcol-gpu-gateway-0.otelcol-gpu-gateway.otelcol-gpu.svc:8787", custom.ConsoleURL)

	for name, wants := range map[string][]string{
		"kerberos":  {"auth::kerberos: not supported"},
		"oauth":     {"auth::sasl::oauthbearer_token_source: required for OAUTHBEARER"},
		"bad_times": {"heartbeat_interval (2s) must be below session_timeout (1s)", `initial_offset "middle"`, "retry_backoff::initial_interval (0s) must be positive"},
		"no_topic":  {"topic must not be empty", "group_id must not be empty"},
		"bad_member": {`member_name "gateway 0": at most 253 printable bytes without spaces`,
			`console_url "ftp://gateway-0/console?x=1": want http(s)://host:port of this replica's fault console`},
	} {
		t.Run(name, func(t *testing.T) {
			err := confmap.Validate(load(t, name))
			require.Error(t, err)
			for _, want := range wants {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}
