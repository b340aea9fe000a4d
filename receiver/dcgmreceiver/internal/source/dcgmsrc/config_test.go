package dcgmsrc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestConfigDefaults(t *testing.T) {
	assert.Equal(t, Config{
		Mode: ModeStandalone, Endpoint: DefaultEndpoint,
		CollectionInterval: 10 * time.Second, ProfilingInterval: 30 * time.Second,
		XIDPollInterval: time.Second, CallTimeout: 5 * time.Second,
	}, Config{}.withDefaults())
	assert.Empty(t, Config{Mode: ModeEmbedded}.withDefaults().Endpoint)
}
