package nodestateextension

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.Stability())

	ext, err := f.Create(context.Background(), nopSettings(), f.CreateDefaultConfig())
	require.NoError(t, err)
	_, isStore := ext.(nodestate.Store)
	assert.True(t, isStore, "other components find the store by asserting nodestate.Store")
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, ext.Shutdown(context.Background()))
}

func TestFactoryWrongConfig(t *testing.T) {
	_, err := createExtension(context.Background(), nopSettings(), &struct{}{})
	require.ErrorIs(t, err, errConfigNotNodeState)
}
