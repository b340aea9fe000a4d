package faultcorrelatorconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// agentStart is when the test agent's dcgm receiver started: the
// StartTimestamp of its cumulative points.
var agentStart = t0.Add(-time.Hour)

// scrape is one scrape of testGPU as the dcgm receiver writes it: the
// volatile DBE counter (its start the receiver's start), and the gauges of
// start-up faults (left out when negative).
type scrape struct {
	at                                  time.Time
	start                               time.Time // of the counter; zero: none
	dbe                                 int64
	xidLast, remapFailure, unresponsive float64
}

func (s scrape) metrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", testHost)
	rm.Resource().Attributes().PutStr("gpu.uuid", testGPU)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	ts := pcommon.NewTimestampFromTime(s.at)
	m := ms.AppendEmpty()
	m.SetName("gpu.ecc.errors")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	if !s.start.IsZero() {
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.start))
	}
	dp.SetIntValue(s.dbe)
	dp.Attributes().PutStr("gpu.ecc.type", "dbe_volatile")
	for name, v := range map[string]float64{"gpu.xid.last": s.xidLast, "gpu.memory.row_remap_failure": s.remapFailure, "gpu.unresponsive": s.unresponsive} {
		if v < 0 {
			continue
		}
		g := ms.AppendEmpty()
		g.SetName(name)
		gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
		gp.SetTimestamp(ts)
		gp.SetDoubleValue(v)
	}
	return md
}

// healthy is a scrape with nothing wrong at at, the agent started at start.
func healthy(at, start time.Time) scrape {
	return scrape{at: at, start: start}
}

// openAfter feeds the scrapes to a new correlator, evaluates after the last
// and returns the records.
func openAfter(t *testing.T, scrapes ...scrape) []fault.Record {
	t.Helper()
	c, sink, clock := newTestCorrelator(t, nil)
	for _, s := range scrapes {
		require.NoError(t, c.ConsumeMetrics(context.Background(), s.metrics()))
		clock.at = s.at.Add(time.Second)
	}
	require.NoError(t, c.evaluate(context.Background()))
	return faults(t, sink)
}

func TestDBEPresentAtStartOpensP1(t *testing.T) {
	first := healthy(agentStart.Add(15*time.Second), agentStart)
	first.dbe = 2
	got := openAfter(t, first)
	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, fault.StateOpen, r.State)
	assert.Equal(t, fault.TypeGPUMemoryDBE, r.Type)
	assert.Equal(t, fault.SeverityP1, r.Severity)
	assert.Equal(t, "dbe_alone", r.Rule)
	assert.Equal(t, fault.ActionCordon, r.Action)
	assert.True(t, r.PresentAtStart)
	assert.True(t, r.FirstSeen.Equal(agentStart), "onset: the counter's start, %v", r.FirstSeen)
	assert.Equal(t, fault.ID("gpu.memory.dbe", "gpu:"+testGPU, agentStart, 5*time.Minute), r.ID)
	require.Len(t, r.Evidence, 1)
	assert.Equal(t, "gpu.ecc.errors{gpu.ecc.type=dbe_volatile}", r.Evidence[0].Signal)
	assert.InDelta(t, 2, r.Evidence[0].Value, 0)
}

func TestDBEGrowthAfterStartIsNotPresentAtStart(t *testing.T) {
	first := healthy(agentStart.Add(15*time.Second), agentStart)
	second := healthy(agentStart.Add(25*time.Second), agentStart)
	second.dbe = 2
	got := openAfter(t, first, second)
	require.Len(t, got, 1)
	assert.Equal(t, fault.TypeGPUMemoryDBE, got[0].Type)
	assert.Equal(t, "dbe_alone", got[0].Rule)
	assert.False(t, got[0].PresentAtStart)
	assert.True(t, got[0].FirstSeen.Equal(second.at), "onset: the growth, %v", got[0].FirstSeen)
}

// A correlator that restarts (or a replica that takes the partition over)
// sees the same series first at another scrape: the same fault id, so the
// remediation's dedup by fault.id does not act twice.
func TestPresentAtStartIDIsStableAcrossRestarts(t *testing.T) {
	var ids []string
	for _, firstSeen := range []time.Duration{15 * time.Second, 45 * time.Second, 4 * time.Minute} {
		s := healthy(agentStart.Add(firstSeen), agentStart)
		s.dbe = 2
		got := openAfter(t, s)
		require.Len(t, got, 1)
		assert.True(t, got[0].PresentAtStart)
		ids = append(ids, got[0].ID)
	}
	assert.Equal(t, []string{ids[0], ids[0], ids[0]}, ids)
}

// A series first seen long after the agent started ran while watched by
// someone (this correlator before a restart): what grew then opened as it
// happened, and its first reading is no start-up fault.
func TestLateFirstReadingIsNoStartupFault(t *testing.T) {
	s := healthy(agentStart.Add(2*time.Hour), agentStart)
	s.dbe = 2
	assert.Empty(t, openAfter(t, s))
}

// Without a start time (a counter without StartTimestamp, no counter on
// the resource) there is nothing to anchor a stable id to: no fault.
func TestStartupFaultNeedsAStartTime(t *testing.T) {
	s := healthy(t0, time.Time{})
	s.dbe, s.xidLast = 2, 79
	assert.Empty(t, openAfter(t, s))
}

func TestStartupGaugesOpenMarkedFaults(t *testing.T) {
	at := agentStart.Add(10 * time.Second)
	for _, tc := range []struct {
		name     string
		mutate   func(*scrape)
		typ      fault.Type
		rule     string
		severity fault.Severity
		xid      int
	}{
		{"xid 79 on the first scrape", func(s *scrape) { s.xidLast = 79 }, fault.TypeGPUFellOffBus, "xid_79", fault.SeverityP1, 79},
		{"xid 13 on the first scrape", func(s *scrape) { s.xidLast = 13 }, fault.TypeGPUXID, "xid_13", fault.SeverityP3, 13},
		{"row remap failed", func(s *scrape) { s.remapFailure = 1 }, fault.TypeGPUMemoryDBE, "row_remap_failure", fault.SeverityP2, 0},
		{"already unresponsive", func(s *scrape) { s.unresponsive = 1 }, fault.TypeGPUUnresponsive, "gpu_unresponsive", fault.SeverityP1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy(at, agentStart)
			tc.mutate(&s)
			got := openAfter(t, s)
			require.Len(t, got, 1, "%+v", got)
			r := got[0]
			assert.Equal(t, tc.typ, r.Type)
			assert.Equal(t, tc.rule, r.Rule)
			assert.Equal(t, tc.severity, r.Severity)
			assert.Equal(t, tc.xid, r.XID)
			assert.True(t, r.PresentAtStart)
			assert.True(t, r.FirstSeen.Equal(agentStart), "onset: the resource's counter start, %v", r.FirstSeen)
		})
	}
}

// An XID code no rule reads alone, and a healthy first scrape, open
// nothing; nor does the second reading of a gauge.
func TestStartupChecksLookAtTheFirstReadingOnly(t *testing.T) {
	s := healthy(agentStart.Add(10*time.Second), agentStart)
	s.xidLast = 43
	assert.Empty(t, openAfter(t, s))

	first := healthy(agentStart.Add(10*time.Second), agentStart)
	second := healthy(agentStart.Add(20*time.Second), agentStart)
	second.xidLast = 79 // a change of gpu.xid.last: its XID record opens it
	assert.Empty(t, openAfter(t, first, second))
}

// The mark stays on the fault's later records.
func TestPresentAtStartMarkStaysOnUpdates(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()
	first := healthy(agentStart.Add(10*time.Second), agentStart)
	first.dbe = 2
	require.NoError(t, c.ConsumeMetrics(ctx, first.metrics()))
	clock.at = first.at.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	opened := faults(t, sink)
	require.Len(t, opened, 1)

	grown := healthy(agentStart.Add(20*time.Second), agentStart)
	grown.dbe = 3
	require.NoError(t, c.ConsumeMetrics(ctx, grown.metrics()))
	clock.at = grown.at.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	updated := faults(t, sink)
	require.Len(t, updated, 1)
	assert.Equal(t, fault.StateUpdate, updated[0].State)
	assert.Equal(t, opened[0].ID, updated[0].ID)
	assert.True(t, updated[0].PresentAtStart)
}
