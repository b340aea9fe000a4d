package electionextension

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/electionextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, ownership.ExtensionType, NewFactory().Type().String(), "the type ownership.FromHost looks for")
}

// No settings: an empty entry loads, and an unknown key is refused by name.
func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, name := range []string{"", "gateway"} {
		cfg := NewFactory().CreateDefaultConfig()
		sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
		require.NoError(t, err)
		require.NoError(t, sub.Unmarshal(cfg))
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, createDefaultConfig(), cfg)
	}
	err = confmap.NewFromStringMap(map[string]any{"group_id": "x"}).Unmarshal(NewFactory().CreateDefaultConfig())
	assert.ErrorContains(t, err, "group_id")
}
