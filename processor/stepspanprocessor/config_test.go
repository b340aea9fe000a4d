package stepspanprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

func TestConfigValidate(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.Validate())
	cfg.CollectiveWait = 0
	cfg.OrphanAfter = time.Second
	cfg.MaxOpenSteps = -1
	cfg.AnomalyFactor = 0.5
	err := cfg.Validate()
	assert.ErrorContains(t, err, "collective_wait: must be greater than 0")
	assert.ErrorContains(t, err, "max_open_steps: must be greater than 0, got -1")
	assert.ErrorContains(t, err, "anomaly_factor: must be greater than 1, got 0.5")
	cfg = createDefaultConfig().(*Config)
	cfg.OrphanAfter = time.Second
	assert.ErrorContains(t, cfg.Validate(), "orphan_after: 1s must not be shorter than collective_wait 5s")
}
