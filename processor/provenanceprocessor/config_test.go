package provenanceprocessor

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

// loadConfig unmarshals testdata/config.yaml's provenance/<name> over the
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
	assert.Empty(t, cfg.HostName)
	assert.Nil(t, cfg.NodeState)
}

func TestFullConfig(t *testing.T) {
	cfg := loadConfig(t, "full")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "node-a", cfg.HostName)
	require.NotNil(t, cfg.NodeState)
	assert.Equal(t, component.MustNewID("nodestate"), *cfg.NodeState)
}

func TestInvalidConfig(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "space"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host_name")

	long := &Config{HostName: strings.Repeat("n", 254)}
	err = long.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host_name")
}
