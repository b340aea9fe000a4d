package dcgmreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRefusedExporterEnv(t *testing.T) {
	assert.Empty(t, refusedExporterEnv([]string{"DCGM_EXPORTER_INTERVAL=30000", "DCGM_EXPORTER_LISTEN=:9400",
		"DCGM_EXPORTER_COLLECTORS=/etc/c.csv", "DCGM_ENDPOINT=localhost:5555", "PATH=/bin", "DCGM_EXPORTERX=1"}))
	errs := refusedExporterEnv([]string{"DCGM_EXPORTER_KUBERNETES=true", "DCGM_EXPORTER_DEBUG=1", "DCGM_REMOTE_HOSTENGINE_INFO=h:5555"})
	require.Len(t, errs, 3)
	assert.Contains(t, errs[0].Error(), "DCGM_EXPORTER_DEBUG is set")
	assert.Contains(t, errs[0].Error(), "use nothing: unset it")
	assert.Contains(t, errs[1].Error(), "DCGM_EXPORTER_KUBERNETES is set")
	assert.Contains(t, errs[1].Error(), "GPU_ATTRIBUTION_KUBERNETES=true")
	assert.Contains(t, errs[2].Error(), "DCGM_REMOTE_HOSTENGINE_INFO is set")
}

// Under naming dcgm_exporter a carried-over setting the agent does not
// read stops the start, naming it; under otel naming it is not looked at.
func TestValidateRefusesCarriedOverExporterSettings(t *testing.T) {
	t.Setenv("DCGM_EXPORTER_DEVICES_STR", "g:0,1")
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	cfg.Naming = NamingDCGMExporter
	assert.ErrorContains(t, cfg.Validate(), "environment: DCGM_EXPORTER_DEVICES_STR is set")
}
