package metadata

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"
)

func TestMetadata(t *testing.T) {
	assert.Equal(t, "nodestate", Type.String())
	assert.Equal(t, "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension", ScopeName)
	assert.Equal(t, component.StabilityLevelAlpha, ExtensionStability)
}
