package stepspanprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor/internal/metadata"
)

// Collectives no step claims before a rank's cap pushes them out are
// counted with their reason and logged once per rank, never dropped
// silently (a 20,000-entry flight-recorder dump is 20,000 collectives).
func TestCollectivesOverTheRankCapAreCounted(t *testing.T) {
	cfg := testConfig()
	cfg.MaxCollectivesPerRank = 8
	cfg.CollectiveWait = time.Hour
	cfg.OrphanAfter = time.Hour
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	core, logs := observer.New(zap.WarnLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	p, err := NewFactory().CreateTraces(context.Background(), set, cfg, &capture{})
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })

	for i := range 20 {
		td := collectiveTraces("xl003", 3, "allreduce", t0.Add(time.Duration(i)*time.Millisecond), time.Millisecond, false)
		require.NoError(t, p.ConsumeTraces(context.Background(), td))
	}

	m, err := tel.GetMetric("otelcol_processor_stepspan_collectives_dropped")
	require.NoError(t, err)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, sum.DataPoints, 1)
	reason, _ := sum.DataPoints[0].Attributes.Value(metadata.TelemetryAttrReason)
	assert.Equal(t, metadata.ReasonPerRankCap, reason.AsString())
	assert.Equal(t, int64(12), sum.DataPoints[0].Value, "20 collectives, 8 kept")
	assert.Equal(t, 1, logs.FilterMessageSnippet("max_collectives_per_rank").Len(), "logged once for the rank")
}

// What the processor holds for the steps is bounded across all ranks, not
// only per rank: sixteen ranks' flight-recorder dumps arriving at once must
// not multiply it by sixteen. Each rank keeps its share of max_collectives
// (its newest), whichever rank came first; what goes is counted as
// node_cap, and a flush sends what was held.
func TestCollectivesBoundedAcrossRanks(t *testing.T) {
	cfg := testConfig()
	cfg.MaxCollectives = 12
	cfg.CollectiveWait = time.Hour
	cfg.OrphanAfter = time.Hour
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	core, logs := observer.New(zap.WarnLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	sink := &capture{}
	pt, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	p := pt.(*stepSpanProcessor)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })

	// Rank 0's dump first, whole; then ranks 1 to 3.
	const ranks, each = 4, 20
	for rank := range int64(ranks) {
		for i := range each {
			td := collectiveTraces("xl003", rank, "allreduce", t0.Add(time.Duration(i)*time.Millisecond), time.Millisecond, false)
			require.NoError(t, p.ConsumeTraces(context.Background(), td))
		}
	}
	p.mu.Lock()
	held := 0
	for rk, list := range p.collectives {
		held += len(list)
		assert.Len(t, list, 12/ranks, "rank %d keeps its share", rk.rank)
		assert.Equal(t, t0.Add((each-1)*time.Millisecond), list[len(list)-1].start, "rank %d keeps its newest", rk.rank)
	}
	assert.Equal(t, 12, held, "held across ranks")
	assert.Equal(t, held, p.held, "the running count agrees")
	p.mu.Unlock()
	assert.Zero(t, sink.count(), "nothing passed on before a flush")

	m, err := tel.GetMetric("otelcol_processor_stepspan_collectives_dropped")
	require.NoError(t, err)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, sum.DataPoints, 1)
	reason, _ := sum.DataPoints[0].Attributes.Value(metadata.TelemetryAttrReason)
	assert.Equal(t, metadata.ReasonNodeCap, reason.AsString())
	assert.Equal(t, int64(ranks*each-12), sum.DataPoints[0].Value, "every collective not held is counted")
	assert.Equal(t, ranks, logs.FilterMessageSnippet("max_collectives").Len(), "logged once per rank")

	p.flush(context.Background(), true) // sends what was held
	assert.Equal(t, 12, sink.count())
	p.mu.Lock()
	assert.Zero(t, p.held)
	p.mu.Unlock()
}
