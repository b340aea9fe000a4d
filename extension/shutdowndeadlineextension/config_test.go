package shutdowndeadlineextension

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

	"github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension/internal/metadata"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, 25*time.Second, cfg.(*Config).Deadline)
}

// Each entry of testdata/config.yaml loaded as the collector loads it: the
// deadline's bounds are refused naming the key and the value.
func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for _, c := range []struct {
		name    string
		want    time.Duration
		wantErr string
	}{
		{name: "", want: 25 * time.Second},
		{name: "stated", want: 25 * time.Second},
		{name: "longer", want: 2 * time.Minute},
		{name: "zero", wantErr: "deadline 0s: want 1s to 10m0s"},
		{name: "short", wantErr: "deadline 500ms: want 1s to 10m0s"},
		{name: "long", wantErr: "deadline 11m0s: want 1s to 10m0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(component.NewIDWithName(metadata.Type, c.name).String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			err = confmap.Validate(cfg)
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
				assert.ErrorContains(t, err, "terminationGracePeriodSeconds")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, cfg.(*Config).Deadline)
		})
	}
	err = confmap.NewFromStringMap(map[string]any{"timeout": "5s"}).Unmarshal(NewFactory().CreateDefaultConfig())
	assert.ErrorContains(t, err, "timeout")
	err = confmap.NewFromStringMap(map[string]any{"deadline": "soon"}).Unmarshal(NewFactory().CreateDefaultConfig())
	assert.ErrorContains(t, err, "deadline")
}
