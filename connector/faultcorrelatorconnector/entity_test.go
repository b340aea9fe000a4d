package faultcorrelatorconnector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestWhereEntities(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr("host.name", "n1")
	attrs.PutStr("gpu.uuid", "GPU-a")
	attrs.PutStr("training.job.id", "j")
	attrs.PutStr("training.rank", "7")
	attrs.PutStr("ib.device", "mlx5_0")
	attrs.PutInt("ib.port", 1)
	var w where
	w.read(attrs)
	assert.Equal(t, []fault.Entity{
		{Kind: fault.EntityGPU, Key: "GPU-a"},
		{Kind: fault.EntityIBPort, Key: "n1/mlx5_0/1"},
		{Kind: fault.EntityRank, Key: "j/7"},
		{Kind: fault.EntityNode, Key: "n1"},
		{Kind: fault.EntityJob, Key: "j"},
	}, w.entities())
	assert.Empty(t, where{}.entities())
}
