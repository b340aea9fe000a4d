package faultcorrelatorconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// telemetryCorrelator is a gateway correlator whose own telemetry and
// logs the test reads.
func telemetryCorrelator(t *testing.T) (*correlator, *consumertest.LogsSink, *fakeClock, *sdkmetric.ManualReader, *zapobserver.ObservedLogs) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	core, logs := zapobserver.New(zapcore.WarnLevel)
	set := testSettings()
	set.TelemetrySettings.MeterProvider = provider
	set.TelemetrySettings.Logger = zap.New(core)
	cfg := createDefaultConfig().(*Config)
	gateway(cfg)
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.LogsSink)
	c, err := newCorrelator(cfg, set, sink)
	require.NoError(t, err)
	clock := &fakeClock{at: t0}
	c.now = clock.now
	return c, sink, clock, reader, logs
}

// lagTelemetry is what the correlator measured of verdict lag.
type lagTelemetry struct {
	count      uint64
	sum        float64
	clockAhead int64
}

func readLag(t *testing.T, reader *sdkmetric.ManualReader) lagTelemetry {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var out lagTelemetry
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "otelcol_faultcorrelator_verdict_lag_seconds":
				h, ok := m.Data.(metricdata.Histogram[float64])
				require.True(t, ok, "%T", m.Data)
				for _, dp := range h.DataPoints {
					out.count += dp.Count
					out.sum += dp.Sum
				}
			case "otelcol_faultcorrelator_verdict_clock_ahead":
				s, ok := m.Data.(metricdata.Sum[int64])
				require.True(t, ok, "%T", m.Data)
				for _, dp := range s.DataPoints {
					out.clockAhead += dp.Value
				}
			}
		}
	}
	return out
}

// withOnset sets straggler.onset_unix_nano on the verdict span of td.
func withOnset(td ptrace.Traces, onset time.Time) ptrace.Traces {
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	sp.Attributes().PutInt(semconv.AttrStragglerOnsetUnixNano, onset.UnixNano())
	return td
}

// 42 consecutive verdicts of one rank reach the gateway late (a consumer
// 10 minutes behind after a restart), or on time from a node whose clock
// is 2 minutes ahead or behind. Each arrival is placed in the straggler
// rule's 2-minute window at the gateway's clock: the fault opens on the
// first straggler.compute verdict to arrive (the straggler processor
// confirmed it already), its evidence keeps the step's own time and its
// arrival, its onset is the one the verdict reported, and the lag is
// measured. Before arrival placement, the 10-minute case opened nothing
// and the clock-ahead case waited until the node's time was reached.
func TestLateVerdictsStillOpenTheFault(t *testing.T) {
	const (
		verdicts  = 42
		stepEvery = 3 * time.Second
		firstSure = 2 // verdicts 0 and 1 say flagged, the rest straggler.compute
		transit   = 500 * time.Millisecond
	)
	for _, tc := range []struct {
		name   string
		offset time.Duration // arrival (gateway clock) minus the span's end (node clock), less transit
		warns  bool
	}{
		{name: "consumer 10m behind", offset: 10 * time.Minute, warns: true},
		{name: "node clock 2m ahead", offset: -2 * time.Minute},
		// Later than straggler_compute's 2m window, not than the longest
		// verdict rule's (straggler_with_nvlink_crc, 5m): no warning.
		{name: "node clock 2m behind", offset: 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink, clock, reader, logs := telemetryCorrelator(t)
			ctx := context.Background()
			dataStart := t0 // the node's time of the first step's end
			onset := dataStart.Add(-2 * time.Second)
			end := func(i int) time.Time { return dataStart.Add(time.Duration(i) * stepEvery) }
			arrival := func(i int) time.Time { return end(i).Add(tc.offset + transit) }

			openedAt := -1
			var records []fault.Record // faults() empties the sink
			for i := 0; i < verdicts; i++ {
				v := "flagged"
				if i >= firstSure {
					v = "straggler.compute"
				}
				td := verdict(1045, testHost, testGPU, v, end(i))
				if i >= firstSure {
					td = withOnset(td, onset)
				}
				clock.at = arrival(i)
				require.NoError(t, c.ConsumeTraces(ctx, td))
				clock.at = arrival(i).Add(100 * time.Millisecond)
				require.NoError(t, c.evaluate(ctx))
				records = append(records, faults(t, sink)...)
				if openedAt < 0 && len(opened(byType(records, fault.TypeStragglerCompute))) > 0 {
					openedAt = i
				}
			}
			require.GreaterOrEqual(t, openedAt, firstSure, "never opened, or opened on a flagged verdict")
			assert.Less(t, openedAt-firstSure, 5, "opens within 5 verdicts of the first straggler.compute arrival")
			assert.Equal(t, firstSure, openedAt, "in fact on that very arrival")

			got := byType(records, fault.TypeStragglerCompute)
			require.NotEmpty(t, got)
			open := got[0]
			require.Equal(t, fault.StateOpen, open.State)
			for _, r := range got {
				assert.Equal(t, open.ID, r.ID, "one fault, one id across its records")
				assert.NotEqual(t, fault.StateResolved, r.State)
			}
			assert.Len(t, opened(got), 1)
			assert.True(t, open.FirstSeen.Equal(onset), "first_seen %v is the onset the verdict reported, %v", open.FirstSeen, onset)
			assert.Equal(t, open.ComputeID(c.cfg.FaultIDBucket), open.ID, "the id hashes the onset, data the same on every replica")
			ev, ok := evidence(open, semconv.AttrStragglerVerdict)
			require.True(t, ok)
			assert.Equal(t, "straggler.compute", ev.Text)
			assert.True(t, ev.Time.Equal(end(firstSure)), "evidence time %v is the step's own time %v", ev.Time, end(firstSure))
			assert.True(t, ev.ObservedAt.Equal(arrival(firstSure)), "observed_at %v is the arrival %v", ev.ObservedAt, arrival(firstSure))
			assert.True(t, open.LastSeen.Equal(end(firstSure)), "last_seen is data time too")

			lag := readLag(t, reader)
			assert.Equal(t, uint64(verdicts), lag.count, "every verdict span's lag is recorded")
			wantLag := (tc.offset + transit).Seconds()
			if wantLag < 0 {
				assert.Equal(t, int64(verdicts), lag.clockAhead, "every verdict ended after it arrived")
				assert.Zero(t, lag.sum, "a negative lag is recorded as 0")
			} else {
				assert.Zero(t, lag.clockAhead)
				assert.InDelta(t, wantLag, lag.sum/float64(lag.count), 1e-6)
			}

			warned := logs.FilterMessageSnippet("arrive later than the straggler rules' window")
			if tc.warns {
				require.Equal(t, 1, warned.Len(), "once per job, not per verdict")
				fields := warned.All()[0].ContextMap()
				assert.Equal(t, testJob, fields[semconv.AttrTrainingJobID])
			} else {
				assert.Zero(t, warned.Len())
			}
		})
	}
}

// The 10-minute case measured: the histogram's mean is the lag, ~600 s.
func TestVerdictLagMeasuresTenMinutes(t *testing.T) {
	c, _, clock, reader, _ := telemetryCorrelator(t)
	ctx := context.Background()
	for i := 0; i < 42; i++ {
		end := t0.Add(time.Duration(i) * 3 * time.Second)
		clock.at = end.Add(10 * time.Minute)
		require.NoError(t, c.ConsumeTraces(ctx, verdict(7, testHost, testGPU, "flagged", end)))
	}
	lag := readLag(t, reader)
	require.Equal(t, uint64(42), lag.count)
	assert.InDelta(t, 600, lag.sum/float64(lag.count), 1e-9)
	// Step spans are no verdicts: their lag is not measured.
	require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{rank: 7, host: testHost, gpu: testGPU, end: t0})))
	assert.Equal(t, uint64(42), readLag(t, reader).count)
}

// A warning per job, not per verdict, and again for another job.
func TestVerdictLagWarnsOncePerJob(t *testing.T) {
	c, _, clock, _, logs := telemetryCorrelator(t)
	ctx := context.Background()
	clock.at = t0.Add(10 * time.Minute)
	for i := 0; i < 5; i++ {
		require.NoError(t, c.ConsumeTraces(ctx, verdict(int64(i), testHost, testGPU, "flagged", t0)))
	}
	td := verdict(1, testHost, testGPU, "flagged", t0)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr(semconv.AttrTrainingJobID, "other-job")
	require.NoError(t, c.ConsumeTraces(ctx, td))
	// Within the window: no warning.
	require.NoError(t, c.ConsumeTraces(ctx, verdict(1, testHost, testGPU, "flagged", clock.at.Add(-time.Minute))))
	warned := logs.FilterMessageSnippet("arrive later than the straggler rules' window")
	require.Equal(t, 2, warned.Len())
	assert.Equal(t, testJob, warned.All()[0].ContextMap()[semconv.AttrTrainingJobID])
	assert.Equal(t, "other-job", warned.All()[1].ContextMap()[semconv.AttrTrainingJobID])
	assert.Equal(t, 5*time.Minute, c.verdictWindow, "the longest window of the rules reading verdicts: straggler_with_nvlink_crc")
}

// rootSpan is a step's root span as the straggler processor writes it: the
// job on the span, no rank.
func rootSpan(job string, end time.Time, jobVerdict string) ptrace.Traces {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName(semconv.SpanTrainStepRoot)
	sp.SetTraceID(pcommon.TraceID{0x4b, 0xf9, 0xaa})
	sp.SetSpanID(pcommon.SpanID{0x0a, 0x01})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-2 * time.Second)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	a := sp.Attributes()
	a.PutStr(semconv.AttrTrainingJobID, job)
	a.PutInt("iteration.step", 120)
	if jobVerdict != "" {
		a.PutStr(semconv.AttrStragglerJobVerdict, jobVerdict)
		a.PutDouble(semconv.AttrStragglerSlowShare, 0.5)
	}
	return td
}

// The job verdict of a step's root span (no rank) opens job.slowdown on
// the job, recommending nothing, even when it arrives 10 minutes late; a
// root span without one opens nothing.
func TestRootSpanJobVerdictOpensJobSlowdown(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	clock.at = t0.Add(10 * time.Minute)
	require.NoError(t, c.ConsumeTraces(ctx, rootSpan("healthy-job", t0, "")))
	require.NoError(t, c.ConsumeTraces(ctx, rootSpan(testJob, t0, semconv.VerdictJobSlowdown)))
	clock.at = clock.at.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	all := faults(t, sink)
	got := byType(all, fault.TypeJobSlowdown)
	require.Len(t, got, 1, "%v", all)
	r := got[0]
	assert.Equal(t, fault.Entity{Kind: fault.EntityJob, Key: testJob}, r.Entity)
	assert.Equal(t, fault.ActionNone, r.Action)
	assert.Equal(t, fault.SeverityP3, r.Severity)
	assert.Equal(t, "job_slowdown", r.Rule)
	assert.Equal(t, testJob, r.JobID)
	assert.False(t, r.RankKnown)
	assert.True(t, r.FirstSeen.Equal(t0), "onset: the step's own time")
	ev, ok := evidence(r, semconv.AttrStragglerJobVerdict)
	require.True(t, ok)
	assert.Equal(t, semconv.VerdictJobSlowdown, ev.Text)
	assert.True(t, ev.ObservedAt.Equal(t0.Add(10*time.Minute)))
	assert.Len(t, all, 1, "nothing for the job without a verdict, nothing per rank")
}

// Agent mode reads no spans; metrics keep their data time in either mode
// (placeAtArrival is for conclusions, not counters).
func TestPlaceAtArrivalOnlyInGateway(t *testing.T) {
	agent, _, _ := newTestCorrelator(t, nil)
	gw, _, _ := newTestCorrelator(t, gateway)
	now := t0.Add(10 * time.Minute)
	for _, tc := range []struct {
		c              *correlator
		wantAt, wantDT time.Time
	}{{agent, t0, time.Time{}}, {gw, now, t0}} {
		s := rules.Sample{Signal: semconv.AttrStragglerVerdict, Text: "flagged", At: t0}
		tc.c.placeAtArrival(&s, now)
		assert.True(t, s.At.Equal(tc.wantAt), "%s: At %v", tc.c.cfg.Mode, s.At)
		assert.True(t, s.DataTime.Equal(tc.wantDT), "%s: DataTime %v", tc.c.cfg.Mode, s.DataTime)
		again := s
		tc.c.placeAtArrival(&again, now.Add(time.Minute))
		assert.Equal(t, s, again, "placed once: a second call keeps the first arrival")
	}
}

// The onset of a verdict span: a positive integer (or double) of Unix
// nanoseconds; anything else is no onset, never a panic.
func TestOnsetOf(t *testing.T) {
	m := pcommon.NewMap()
	assert.True(t, onsetOf(m).IsZero())
	m.PutInt(semconv.AttrStragglerOnsetUnixNano, t0.UnixNano())
	assert.True(t, onsetOf(m).Equal(t0))
	m.PutDouble(semconv.AttrStragglerOnsetUnixNano, float64(t0.UnixNano()))
	assert.InDelta(t, 0, onsetOf(m).Sub(t0).Seconds(), 1e-3)
	for _, bad := range []func(){
		func() { m.PutInt(semconv.AttrStragglerOnsetUnixNano, -5) },
		func() { m.PutInt(semconv.AttrStragglerOnsetUnixNano, 0) },
		func() { m.PutDouble(semconv.AttrStragglerOnsetUnixNano, 1e300) },
		func() { m.PutStr(semconv.AttrStragglerOnsetUnixNano, "yesterday") },
	} {
		bad()
		assert.True(t, onsetOf(m).IsZero())
	}
}
