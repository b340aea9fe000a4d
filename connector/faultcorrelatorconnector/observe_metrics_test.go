package faultcorrelatorconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestSignalNames(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr("error.type", "crc_flit")
	assert.Equal(t, []string{"gpu.nvlink.errors", "gpu.nvlink.errors{error.type=crc_flit}"}, signalNames("gpu.nvlink.errors", attrs))
}

func TestCounterGrowthHandlesResets(t *testing.T) {
	c, _, _ := newTestCorrelator(t, nil)
	assert.InDelta(t, 0, c.counterGrowth("s", 100), 0) // first sight: no growth known
	assert.InDelta(t, 5, c.counterGrowth("s", 105), 0)
	assert.InDelta(t, 3, c.counterGrowth("s", 3), 0) // reset: counted from zero
}

// Two GPUs' counters on one node must not look like growth when their
// points interleave in the node's series.
func TestNodeCounterSumsGrowthAcrossGPUs(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, func(cfg *Config) {
		cfg.Rules = "rules:\n  - {name: node_crc, fault_type: nvlink.degraded, severity: P2, action: cordon, blast_radius: node, confidence: 0.5, entity: node, window: 5m, all: [{signal: \"gpu.nvlink.errors{error.type=crc_flit}\", agg: delta, op: \">\", value: 0}]}\n"
	})
	ctx := context.Background()
	at := t0
	for i := 0; i < 4; i++ {
		for _, g := range []struct {
			uuid string
			crc  int64
		}{{"GPU-a", 5000}, {"GPU-b", 0}} {
			md := pmetric.NewMetrics()
			rm := md.ResourceMetrics().AppendEmpty()
			rm.Resource().Attributes().PutStr("host.name", testHost)
			rm.Resource().Attributes().PutStr("gpu.uuid", g.uuid)
			m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
			m.SetName("gpu.nvlink.errors")
			s := m.SetEmptySum()
			s.SetIsMonotonic(true)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dp := s.DataPoints().AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
			dp.SetIntValue(g.crc)
			dp.Attributes().PutStr("error.type", "crc_flit")
			require.NoError(t, c.ConsumeMetrics(ctx, md))
		}
		at = at.Add(10 * time.Second)
	}
	clock.at = at
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, faults(t, sink), "flat counters on two GPUs are no growth on their node")
}
