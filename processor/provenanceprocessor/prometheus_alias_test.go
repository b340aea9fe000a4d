package provenanceprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Prometheus reads every metric a script sends too, and turns "." into
// "_": a script's gpu_ecc_errors{gpu_ecc_type=dbe_volatile} counter would
// be the GPU receiver's gpu_ecc_errors_total series there (the shipped
// alert on double-bit errors reads it), its host_name and gpu_uuid the
// labels of another node's GPU. Such names are renamed like the hardware
// signals they stand for.
func TestPrometheusAliasesRenamed(t *testing.T) {
	h := newHarness(t, true)
	p, sink := h.metrics(t)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr("host.name", own)
	res.PutStr("host_name", victim)
	res.PutStr("gpu_uuid", victimGPU)
	res.PutStr("training.job.id", "llama-70b")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	m := ms.AppendEmpty()
	m.SetName("gpu_ecc_errors_total")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetIntValue(3)
	dp.Attributes().PutStr("gpu_ecc_type", "dbe_volatile")
	mfu := ms.AppendEmpty()
	mfu.SetName("training.mfu")
	mfu.SetEmptyGauge().DataPoints().AppendEmpty().Attributes().PutInt("training.rank", 3)
	require.NoError(t, p.ConsumeMetrics(context.Background(), md))

	out := sink.AllMetrics()[0].ResourceMetrics().At(0)
	ores := out.Resource().Attributes()
	assert.Equal(t, victim, str(t, ores, "forged.host_name"))
	assert.Equal(t, victimGPU, str(t, ores, "forged.gpu_uuid"))
	assert.Equal(t, "<absent>", str(t, ores, "host_name"))
	assert.Equal(t, own, str(t, ores, "host.name"))
	assert.Equal(t, "llama-70b", str(t, ores, "training.job.id"))
	oms := out.ScopeMetrics().At(0).Metrics()
	assert.Equal(t, "forged.gpu_ecc_errors_total", oms.At(0).Name())
	assert.Equal(t, "dbe_volatile", str(t, oms.At(0).Sum().DataPoints().At(0).Attributes(), "forged.gpu_ecc_type"))
	assert.Equal(t, "training.mfu", oms.At(1).Name(), "a script's own metric passes")
	assert.Equal(t, "3", str(t, oms.At(1).Gauge().DataPoints().At(0).Attributes(), "training.rank"))
	assert.Equal(t, map[string]int64{"hardware_signal": 4}, h.rejected(t))
}
