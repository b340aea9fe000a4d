package metadata

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"
)

func TestMetadata(t *testing.T) {
	assert.Equal(t, "ib", Type.String())
	assert.Equal(t, "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver", ScopeName)
	assert.Equal(t, component.StabilityLevelAlpha, MetricsStability)
}
