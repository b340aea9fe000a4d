package nodestateprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor/internal/metadata"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, component.MustNewID("nodestate"), cfg.Extension)
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	tests := []struct {
		name    string
		want    *Config
		wantErr string
	}{
		{name: "", want: &Config{Extension: component.MustNewID("nodestate")}},
		{name: "custom", want: &Config{Extension: component.MustNewIDWithName("nodestate", "agent")}},
		{name: "empty", wantErr: "id must not be empty"},
		{name: "bad_id", wantErr: `"no spaces allowed"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, tt.name).String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestValidateZeroConfig(t *testing.T) {
	require.EqualError(t, (&Config{}).Validate(), `extension must name the nodestate extension, e.g. "nodestate"`)
}
