package exportersrc

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// A page from a dcgm-exporter whose counters CSV adds fields outside the
// catalogue: they are read by their DCGM ids, typed as the page says.
func TestTranslateFieldsOutsideTheCatalogue(t *testing.T) {
	const page = `# HELP DCGM_FI_DEV_FAN_SPEED Fan speed (in 0-100%).
# TYPE DCGM_FI_DEV_FAN_SPEED gauge
DCGM_FI_DEV_FAN_SPEED{gpu="0",UUID="GPU-a",Hostname="n1"} 43
# HELP DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L0 NVLink flow-control CRC errors on link 0.
# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L0 counter
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L0{gpu="0",UUID="GPU-a",Hostname="n1"} 7
NOT_A_DCGM_FIELD{gpu="0",UUID="GPU-a",Hostname="n1"} 1
`
	snap, stats, err := Translate(strings.NewReader(page), time.Unix(1_790_000_000, 0), "n1")
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 1)
	fan, _ := model.FieldIDByName("DCGM_FI_DEV_FAN_SPEED")
	flit0, _ := model.FieldIDByName("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L0")
	assert.Equal(t, []model.Value{
		{Field: fan, Float: 43, IsFloat: true},
		{Field: flit0, Int: 7},
	}, snap.GPUs[0].Values, "the counter reads as an integer, the gauge as printed; by field id")
	assert.Equal(t, 2, stats.Values)
	assert.Equal(t, 1, stats.Unknown, "only the name that is no DCGM field is unknown")
}
