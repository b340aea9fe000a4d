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
// only per rank: sixteen ranks' flight-recorder dumps arriving at once
// must not multiply it by sixteen. Collectives beyond max_collectives pass
// on at once, unsummarised (nothing dropped), logged once while full; a
// flush that sends what was held makes room again.
func TestCollectivesBoundedAcrossRanks(t *testing.T) {
	cfg := testConfig()
	cfg.MaxCollectives = 10
	cfg.CollectiveWait = time.Hour
	cfg.OrphanAfter = time.Hour
	core, logs := observer.New(zap.WarnLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	sink := &capture{}
	pt, err := NewFactory().CreateTraces(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	p := pt.(*stepSpanProcessor)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })

	const ranks, each = 4, 5
	for rank := range int64(ranks) {
		for i := range each {
			td := collectiveTraces("xl003", rank, "allreduce", t0.Add(time.Duration(i)*time.Millisecond), time.Millisecond, false)
			require.NoError(t, p.ConsumeTraces(context.Background(), td))
		}
	}
	p.mu.Lock()
	held := 0
	for _, list := range p.collectives {
		held += len(list)
	}
	assert.Equal(t, 10, held, "held across ranks")
	assert.Equal(t, 10, p.held, "the running count agrees")
	p.mu.Unlock()
	assert.Equal(t, ranks*each-10, sink.count(), "the rest passed on at once")
	assert.Equal(t, 1, logs.FilterMessageSnippet("max_collectives").Len(), "logged once while full")

	p.flush(context.Background(), true) // sends what was held
	assert.Equal(t, ranks*each, sink.count(), "nothing lost")
	p.mu.Lock()
	assert.Zero(t, p.held)
	assert.False(t, p.fullWarned, "room again: the next time it fills is logged")
	p.mu.Unlock()
}
