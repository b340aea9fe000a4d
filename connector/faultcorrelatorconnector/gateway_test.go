package faultcorrelatorconnector

import (
	"context"
	"math"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

const testJob = "llama-70b"

// rankSpan describes one span a rank (or the gateway, for verdicts) sends.
type rankSpan struct {
	name    string // train.step unless set
	host    string
	gpu     string
	rank    int64
	job     string
	end     time.Time
	dur     time.Duration
	attrs   map[string]any
	status  ptrace.StatusCode
	message string
}

// spans builds one ptrace.Traces: a resource per span as the agents send
// them (host, GPU, job and rank on the resource, the rest on the span).
func spans(in ...rankSpan) ptrace.Traces {
	td := ptrace.NewTraces()
	for i, s := range in {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		job := s.job
		if job == "" {
			job = testJob
		}
		ra.PutStr("training.job.id", job)
		ra.PutInt("training.rank", s.rank)
		if s.host != "" {
			ra.PutStr("host.name", s.host)
		}
		if s.gpu != "" {
			ra.PutStr("gpu.uuid", s.gpu)
		}
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(s.name)
		if s.name == "" {
			sp.SetName("train.step")
		}
		sp.SetTraceID(pcommon.TraceID{0x4b, 0xf9, byte(i)})
		sp.SetSpanID(pcommon.SpanID{0x00, 0xf0, byte(s.rank), byte(i)})
		dur := s.dur
		if dur == 0 {
			dur = 2 * time.Second
		}
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.end.Add(-dur)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(s.end))
		if s.status != ptrace.StatusCodeUnset {
			sp.Status().SetCode(s.status)
			sp.Status().SetMessage(s.message)
		}
		if err := sp.Attributes().FromRaw(s.attrs); err != nil {
			panic(err)
		}
	}
	return td
}

// verdict is the straggler processor's train.step.verdict span: every
// attribute on the span, none on the resource.
func verdict(rank int64, host, gpu, v string, end time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("train.step.verdict")
	sp.SetTraceID(pcommon.TraceID{0x4b, 0xf9, 0xee})
	sp.SetSpanID(pcommon.SpanID{0x0e, byte(rank)})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-2 * time.Second)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	a := sp.Attributes()
	a.PutStr("training.job.id", testJob)
	a.PutInt("training.attempt", 0)
	a.PutInt("iteration.step", 120)
	a.PutInt("training.rank", rank)
	a.PutStr("host.name", host)
	if gpu != "" {
		a.PutStr("gpu.uuid", gpu)
	}
	a.PutDouble("straggler.score", 9.7)
	a.PutStr("straggler.verdict", v)
	a.PutDouble("straggler.compute_ratio", 2.3)
	a.PutDouble("straggler.wait_ratio", 0.1)
	return td
}

// dcgm is one scrape of GPUs on a node as dcgm-exporter gives it: keyed by
// GPU and host, no rank. crc is the cumulative NVLink CRC counter, dbe the
// cumulative volatile DBE counter, throttled the thermal slowdown flag.
type dcgmGPU struct {
	uuid      string
	crc, dbe  int64
	tempC     float64
	throttled bool
}

func dcgm(host string, at time.Time, gpus ...dcgmGPU) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(at)
	for _, g := range gpus {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("host.name", host)
		rm.Resource().Attributes().PutStr("gpu.uuid", g.uuid)
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		counter := func(name, k, v string, n int64) {
			m := ms.AppendEmpty()
			m.SetName(name)
			s := m.SetEmptySum()
			s.SetIsMonotonic(true)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dp := s.DataPoints().AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetIntValue(n)
			dp.Attributes().PutStr(k, v)
		}
		counter("gpu.nvlink.errors", "error.type", "crc_flit", g.crc)
		counter("gpu.ecc.errors", "gpu.ecc.type", "dbe_volatile", g.dbe)
		gauge := func(name, k, v string, x float64) {
			m := ms.AppendEmpty()
			m.SetName(name)
			dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(x)
			dp.Attributes().PutStr(k, v)
		}
		gauge("hw.temperature", "hw.sensor_location", "gpu", g.tempC)
		throttle := 0.0
		if g.throttled {
			throttle = 1
		}
		gauge("gpu.clock.throttle", "gpu.throttle.reason", "hw_thermal_slowdown", throttle)
		gauge("gpu.utilization", "unused", "x", 0.97) // read by no rule
	}
	return md
}

func gateway(cfg *Config) { cfg.Mode = ModeGateway }

func byType(rs []fault.Record, ty fault.Type) []fault.Record {
	var out []fault.Record
	for _, r := range rs {
		if r.Type == ty {
			out = append(out, r)
		}
	}
	return out
}

func evidence(r fault.Record, signal string) (fault.Evidence, bool) {
	for _, ev := range r.Evidence {
		if ev.Signal == signal {
			return ev, true
		}
	}
	return fault.Evidence{}, false
}

// A straggler verdict on a rank span and NVLink CRC growth in the GPU's
// DCGM metrics (no rank) meet on the GPU entity.
func TestVerdictSpanJoinsNVLinkCRCOnTheGPU(t *testing.T) {
	for _, tc := range []struct {
		name          string
		verdict       string
		crcAfter      int64
		gpuOnSpan     bool
		wantNVLink    bool
		wantStraggler fault.Type // "" for none
	}{
		{"compute straggler with CRC growth", "straggler.compute", 1340, true, true, fault.TypeStragglerCompute},
		{"slow link with CRC growth", "straggler.link", 1340, true, true, fault.TypeStragglerLink},
		{"verdict span without gpu.uuid: the rank's step spans named it", "straggler.compute", 1340, false, true, fault.TypeStragglerCompute},
		{"no CRC growth: a straggler, not NVLink", "straggler.compute", 1000, true, false, fault.TypeStragglerCompute},
		{"flagged only: nothing yet", "flagged", 1340, true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink, clock := newTestCorrelator(t, gateway)
			ctx := context.Background()
			// The rank's own step span (as the agent sends it) names its GPU.
			require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{host: testHost, gpu: testGPU, rank: 1045, end: t0})))
			require.NoError(t, c.ConsumeMetrics(ctx, dcgm(testHost, t0, dcgmGPU{uuid: testGPU, crc: 1000, tempC: 70})))
			require.NoError(t, c.ConsumeMetrics(ctx, dcgm(testHost, t0.Add(10*time.Second), dcgmGPU{uuid: testGPU, crc: tc.crcAfter, tempC: 71})))
			gpu := ""
			if tc.gpuOnSpan {
				gpu = testGPU
			}
			require.NoError(t, c.ConsumeTraces(ctx, verdict(1045, testHost, gpu, tc.verdict, t0.Add(12*time.Second))))
			clock.at = t0.Add(13 * time.Second)
			require.NoError(t, c.evaluate(ctx))
			got := faults(t, sink)

			nv := byType(got, fault.TypeNVLinkDegraded)
			if !tc.wantNVLink {
				assert.Empty(t, nv)
			} else {
				require.Len(t, nv, 1)
				r := nv[0]
				assert.Equal(t, "straggler_with_nvlink_crc", r.Rule)
				assert.Equal(t, fault.Entity{Kind: fault.EntityGPU, Key: testGPU}, r.Entity)
				assert.Equal(t, testHost, r.HostName)
				assert.Equal(t, testGPU, r.GPUUUID)
				assert.Equal(t, fault.ActionCordon, r.Action)
				ev, ok := evidence(r, "straggler.verdict")
				require.True(t, ok)
				assert.Equal(t, tc.verdict, ev.Text)
				assert.Equal(t, pcommon.TraceID{0x4b, 0xf9, 0xee}, ev.TraceID, "the verdict span proves it")
				ev, ok = evidence(r, "gpu.nvlink.errors{error.type=crc_flit}")
				require.True(t, ok)
				assert.InDelta(t, 340, ev.Value, 1e-9)
			}
			var stragglers []fault.Record
			for _, r := range got {
				if r.Type == fault.TypeStragglerCompute || r.Type == fault.TypeStragglerLink {
					stragglers = append(stragglers, r)
				}
			}
			if tc.wantStraggler == "" {
				assert.Empty(t, stragglers)
				return
			}
			require.Len(t, stragglers, 1)
			assert.Equal(t, tc.wantStraggler, stragglers[0].Type)
			assert.Equal(t, fault.Entity{Kind: fault.EntityRank, Key: testJob + "/1045"}, stragglers[0].Entity)
			assert.Equal(t, testGPU, stragglers[0].GPUUUID)
		})
	}
}

// The verdict and root spans the gateway derives from a step are not the
// rank's step: their durations are not step durations.
func TestStepDurationOnlyFromTrainStepSpans(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, func(cfg *Config) {
		cfg.Mode = ModeGateway
		cfg.Rules = `rules:
  - {name: step_seen, fault_type: gpu.sync_wait, severity: P4, action: none, blast_radius: gpu, confidence: 1, entity: rank, window: 1m, all: [{signal: training.step.duration, agg: max, op: ">", value: 0}]}
`
	})
	ctx := context.Background()
	require.NoError(t, c.ConsumeTraces(ctx, verdict(7, testHost, testGPU, "straggler.compute", t0)))
	root := spans(rankSpan{name: "train.step.root", rank: 7, host: testHost, end: t0, dur: 9 * time.Second})
	require.NoError(t, c.ConsumeTraces(ctx, root))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, byType(faults(t, sink), fault.TypeGPUSyncWait))

	require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{rank: 7, host: testHost, end: t0, dur: 3 * time.Second})))
	require.NoError(t, c.evaluate(ctx))
	got := byType(faults(t, sink), fault.TypeGPUSyncWait)
	require.Len(t, got, 1)
	assert.InDelta(t, 3, got[0].Evidence[0].Value, 1e-9)
}

// Loss, NCCL timeouts and GPU health arrive on the traces path as they do
// on the logs and metrics paths, and open the same faults.
func TestRankSpanSignalsOpenFaults(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	td := spans(
		rankSpan{rank: 0, host: testHost, gpu: "GPU-0", end: t0, attrs: map[string]any{
			"training.loss": math.NaN(), "nccl.collectives.count": int64(12), "nccl.collectives.anomalies": int64(1),
		}},
		rankSpan{rank: 1, host: testHost, gpu: "GPU-1", end: t0, attrs: map[string]any{
			"training.loss": 2.5, "gpu.health.ecc_dbe_errors": int64(1), "gpu.health.window_s": 60.0,
		}},
		rankSpan{rank: 2, host: testHost, gpu: "GPU-2", end: t0, attrs: map[string]any{
			"gpu.health.xids": []any{int64(79)}, "gpu.health.throttle_reasons": []any{"sw_power_cap"},
		}},
		// The flight-recorder collective of rank 3 that the watchdog retired,
		// sent in full under its step by the stepspan processor.
		rankSpan{name: "nccl:all_reduce", rank: 3, host: testHost, end: t0, attrs: map[string]any{
			"nccl.collective": "all_reduce", "nccl.state": "started",
		}, status: ptrace.StatusCodeError, message: "timed out: retired by the watchdog without completing"},
		// Incomplete but not timed out: no NCCL timeout.
		rankSpan{name: "nccl:all_reduce", rank: 4, host: testHost, end: t0, attrs: map[string]any{
			"nccl.collective": "all_reduce", "nccl.state": "started",
		}, status: ptrace.StatusCodeError, message: "not completed: started"},
	)
	require.NoError(t, c.ConsumeTraces(ctx, td))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	got := faults(t, sink)

	types := map[fault.Type]fault.Entity{}
	for _, r := range got {
		types[r.Type] = r.Entity
	}
	assert.Equal(t, map[fault.Type]fault.Entity{
		fault.TypeTrainingLossNaN: {Kind: fault.EntityJob, Key: testJob},
		fault.TypeGPUMemoryDBE:    {Kind: fault.EntityGPU, Key: "GPU-1"},
		fault.TypeGPUFellOffBus:   {Kind: fault.EntityGPU, Key: "GPU-2"},
		fault.TypeNCCLTimeout:     {Kind: fault.EntityRank, Key: testJob + "/3"},
	}, types)
	assert.Len(t, got, 4)
	nccl := byType(got, fault.TypeNCCLTimeout)[0]
	ev, ok := evidence(nccl, "nccl.collective.timed_out")
	require.True(t, ok)
	assert.Equal(t, pcommon.SpanID{0x00, 0xf0, 3, 3}, ev.SpanID)
}

// gatewaySteps sends one train.step span per rank every 10 s from from to
// to (inclusive) for ranks on hosts, each batch arriving as its spans end
// (liveness is measured on arrival).
func gatewaySteps(t *testing.T, c *correlator, clock *fakeClock, job string, hosts []string, from, to time.Time) {
	t.Helper()
	for at := from; !at.After(to); at = at.Add(10 * time.Second) {
		clock.at = at
		var in []rankSpan
		for i, h := range hosts {
			in = append(in, rankSpan{job: job, rank: int64(i), host: h, gpu: "GPU-" + h, end: at})
		}
		require.NoError(t, c.ConsumeTraces(context.Background(), spans(in...)))
	}
}

func silentNodes(t *testing.T, c *correlator, sink *consumertest.LogsSink, clock *fakeClock, at time.Time) []string {
	t.Helper()
	clock.at = at
	require.NoError(t, c.evaluate(context.Background()))
	var out []string
	for _, r := range byType(faults(t, sink), fault.TypeNodeSilent) {
		assert.Equal(t, fault.StateOpen, r.State)
		out = append(out, r.Entity.Key)
	}
	sort.Strings(out)
	return out
}

func TestNodeSilentOnlyForHostsOfRunningJobs(t *testing.T) {
	hosts := []string{"xl001", "xl002", "xl003"}
	stop := t0.Add(50 * time.Second)

	t.Run("silent node of a running job", func(t *testing.T) {
		c, sink, clock := newTestCorrelator(t, gateway)
		gatewaySteps(t, c, clock, testJob, hosts, t0, stop)
		// xl003 stops; the other two keep stepping (their DCGM metrics go
		// to another replica: spans alone keep them alive here).
		gatewaySteps(t, c, clock, testJob, hosts[:2], stop.Add(10*time.Second), stop.Add(3*time.Minute))
		assert.Empty(t, silentNodes(t, c, sink, clock, stop.Add(time.Minute)), "within the 2m window")
		got := silentNodes(t, c, sink, clock, stop.Add(2*time.Minute+time.Second))
		assert.Equal(t, []string{"xl003"}, got)
		assert.Equal(t, int64(1), c.openCounts()[[2]string{"node.silent", "P2"}])
	})

	t.Run("job finished: no fault", func(t *testing.T) {
		c, sink, clock := newTestCorrelator(t, gateway)
		gatewaySteps(t, c, clock, testJob, hosts, t0, stop)
		for _, at := range []time.Duration{time.Minute, 2*time.Minute + time.Second, 10 * time.Minute, 2 * time.Hour} {
			assert.Empty(t, silentNodes(t, c, sink, clock, stop.Add(at)), "at +%v", at)
		}
	})

	t.Run("job finished, a node keeps sending metrics, another goes: no fault", func(t *testing.T) {
		c, sink, clock := newTestCorrelator(t, gateway)
		gatewaySteps(t, c, clock, testJob, hosts, t0, stop)
		for at := stop.Add(10 * time.Second); at.Before(stop.Add(5 * time.Minute)); at = at.Add(10 * time.Second) {
			clock.at = at
			require.NoError(t, c.ConsumeMetrics(context.Background(), dcgm("xl001", at, dcgmGPU{uuid: "GPU-xl001", tempC: 60})))
		}
		assert.Empty(t, silentNodes(t, c, sink, clock, stop.Add(5*time.Minute)))
	})

	t.Run("a node that never ran a rank: no fault", func(t *testing.T) {
		c, sink, clock := newTestCorrelator(t, gateway)
		// xl009 sends metrics and an XID log, then stops, while a job runs
		// elsewhere.
		require.NoError(t, c.ConsumeMetrics(context.Background(), dcgm("xl009", t0, dcgmGPU{uuid: "GPU-9", tempC: 60})))
		gatewaySteps(t, c, clock, testJob, hosts, t0, t0.Add(4*time.Minute))
		assert.Empty(t, silentNodes(t, c, sink, clock, t0.Add(4*time.Minute)))
	})

	t.Run("metrics and logs count as signs of life", func(t *testing.T) {
		c, sink, clock := newTestCorrelator(t, gateway)
		gatewaySteps(t, c, clock, testJob, hosts, t0, stop)
		// xl003's rank stops stepping (its spans go quiet) but the node
		// still reports; the other two ranks step on.
		gatewaySteps(t, c, clock, testJob, hosts[:2], stop.Add(10*time.Second), stop.Add(3*time.Minute))
		for at := stop.Add(10 * time.Second); !at.After(stop.Add(3 * time.Minute)); at = at.Add(30 * time.Second) {
			clock.at = at
			require.NoError(t, c.ConsumeMetrics(context.Background(), dcgm("xl003", at, dcgmGPU{uuid: "GPU-xl003", tempC: 60})))
		}
		assert.Empty(t, silentNodes(t, c, sink, clock, stop.Add(3*time.Minute)))
	})
}

// Three distinct faults on one node within 24h escalate to
// node.repeated_faults (drain), whose evidence lists them.
func TestNodeThatKeepsFaultingEscalates(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(13, t0)))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(31, t0.Add(2*time.Hour))))
	clock.at = t0.Add(2*time.Hour + time.Second)
	require.NoError(t, c.evaluate(ctx))
	require.NoError(t, c.evaluate(ctx))
	first := faults(t, sink)
	assert.Empty(t, byType(first, fault.TypeNodeRepeatedFaults), "two faults are not yet a pattern")

	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(79, t0.Add(20*time.Hour))))
	clock.at = t0.Add(20*time.Hour + time.Second)
	require.NoError(t, c.evaluate(ctx)) // opens XID 79's fault
	require.NoError(t, c.evaluate(ctx)) // sees the third opening
	got := byType(faults(t, sink), fault.TypeNodeRepeatedFaults)
	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, fault.StateOpen, r.State)
	assert.Equal(t, "node_repeated_faults", r.Rule)
	assert.Equal(t, fault.SeverityP2, r.Severity)
	assert.Equal(t, fault.ActionDrain, r.Action)
	assert.Equal(t, fault.BlastNode, r.BlastRadius)
	assert.Equal(t, fault.Entity{Kind: fault.EntityNode, Key: testHost}, r.Entity)
	assert.Equal(t, testHost, r.HostName)
	require.Len(t, r.Evidence, 3)
	var texts []string
	for _, ev := range r.Evidence {
		assert.Equal(t, "fault.opened", ev.Signal)
		texts = append(texts, ev.Text)
	}
	assert.Equal(t, []string{
		"gpu.xid.13 " + fault.ID("gpu.xid.13", "gpu:"+testGPU, t0, 5*time.Minute),
		"gpu.xid.31 " + fault.ID("gpu.xid.31", "gpu:"+testGPU, t0.Add(2*time.Hour), 5*time.Minute),
		"gpu.fell_off_bus " + fault.ID("gpu.fell_off_bus", "gpu:"+testGPU, t0.Add(20*time.Hour), 5*time.Minute),
	}, texts)
	assert.True(t, r.FirstSeen.Equal(t0), "onset: the first of the faults")

	// Evaluating again changes nothing: the escalation does not count itself.
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, faults(t, sink))
}

// One incident seen as many faults (the eight ranks of a node slow on one
// link, then the GPU's DBE and XID) is no node that keeps faulting.
func TestOneIncidentIsNoEscalation(t *testing.T) {
	for _, tc := range []struct {
		gap      time.Duration
		escalate bool
	}{{10 * time.Minute, false}, {0, true}} {
		c, sink, clock := newTestCorrelator(t, func(cfg *Config) { cfg.Mode, cfg.IncidentGap = ModeGateway, tc.gap })
		ctx := context.Background()
		for r := int64(0); r < 8; r++ {
			require.NoError(t, c.ConsumeTraces(ctx, verdict(r, testHost, "GPU-"+strconv.FormatInt(r, 10), "straggler.link", t0.Add(time.Duration(r)*time.Second))))
		}
		require.NoError(t, c.ConsumeLogs(ctx, xidLogs(79, t0.Add(time.Minute))))
		for i := 0; i < 3; i++ {
			clock.at = t0.Add(time.Minute + time.Duration(i+1)*time.Second)
			require.NoError(t, c.evaluate(ctx))
		}
		got := faults(t, sink)
		assert.Len(t, byType(got, fault.TypeStragglerLink), 8)
		if tc.escalate {
			require.Len(t, byType(got, fault.TypeNodeRepeatedFaults), 1, "incident_gap 0 counts every fault")
			assert.Len(t, byType(got, fault.TypeNodeRepeatedFaults)[0].Evidence, 9)
		} else {
			assert.Empty(t, byType(got, fault.TypeNodeRepeatedFaults))
		}
	}
}

func TestEscalationIsConfigurableByOverride(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, func(cfg *Config) {
		cfg.Rules = `rules:
  - {name: node_repeated_faults, fault_type: node.repeated_faults, severity: P1, action: drain, blast_radius: node, confidence: 0.9, entity: node, window: 1h, all: [{signal: fault.opened, agg: distinct, op: ">=", value: 2}]}
`
	})
	ctx := context.Background()
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(13, t0)))
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(31, t0.Add(2*time.Hour))))
	clock.at = t0.Add(2*time.Hour + time.Second)
	require.NoError(t, c.evaluate(ctx))
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, byType(faults(t, sink), fault.TypeNodeRepeatedFaults), "two hours apart: outside a 1h window")
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(45, t0.Add(2*time.Hour+15*time.Minute))))
	clock.at = t0.Add(2*time.Hour + 15*time.Minute + time.Second)
	require.NoError(t, c.evaluate(ctx))
	require.NoError(t, c.evaluate(ctx))
	got := byType(faults(t, sink), fault.TypeNodeRepeatedFaults)
	require.Len(t, got, 1)
	assert.Equal(t, fault.SeverityP1, got[0].Severity)
}

// Eight ranks' step spans and the node's metrics all report one GPU's DBE:
// one fault record.
func TestManyRanksOneGPUOneRecord(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	require.NoError(t, c.ConsumeMetrics(ctx, dcgm(testHost, t0, dcgmGPU{uuid: testGPU, dbe: 0, tempC: 70})))
	var in []rankSpan
	for r := int64(0); r < 8; r++ {
		in = append(in, rankSpan{rank: r, host: testHost, gpu: testGPU, end: t0.Add(5 * time.Second),
			attrs: map[string]any{"gpu.health.ecc_dbe_errors": int64(2), "gpu.health.xids": []any{int64(48)}}})
	}
	require.NoError(t, c.ConsumeTraces(ctx, spans(in...)))
	require.NoError(t, c.ConsumeMetrics(ctx, dcgm(testHost, t0.Add(10*time.Second), dcgmGPU{uuid: testGPU, dbe: 2, tempC: 70})))
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(48, t0.Add(4*time.Second))))
	clock.at = t0.Add(11 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	got := faults(t, sink)
	require.Len(t, got, 1, "%v", got)
	assert.Equal(t, fault.TypeGPUMemoryDBE, got[0].Type)
	assert.Equal(t, fault.Entity{Kind: fault.EntityGPU, Key: testGPU}, got[0].Entity)
	assert.True(t, got[0].FirstSeen.Equal(t0.Add(4*time.Second)), "onset: the XID, the earliest evidence")

	// More ranks report it on the next step: still the same one fault.
	for i := range in {
		in[i].end = t0.Add(15 * time.Second)
	}
	require.NoError(t, c.ConsumeTraces(ctx, spans(in...)))
	clock.at = t0.Add(16 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	for _, r := range faults(t, sink) {
		assert.NotEqual(t, fault.StateOpen, r.State)
	}
	assert.Equal(t, map[[2]string]int64{{"gpu.memory.dbe", "P1"}: 1}, c.openCounts())
}

// Two gateway replicas fed the same data, in another order and evaluating
// at other moments, emit the same fault ids.
func TestReplicasAgreeOnFaultIDs(t *testing.T) {
	type input struct {
		traces  ptrace.Traces
		metrics pmetric.Metrics
		logs    plog.Logs
	}
	inputs := []input{
		{metrics: dcgm(testHost, t0, dcgmGPU{uuid: testGPU, crc: 1000, tempC: 70}, dcgmGPU{uuid: "GPU-b", tempC: 70})},
		{metrics: dcgm(testHost, t0.Add(10*time.Second), dcgmGPU{uuid: testGPU, crc: 1400, tempC: 70}, dcgmGPU{uuid: "GPU-b", dbe: 1, tempC: 70})},
		{traces: verdict(1045, testHost, testGPU, "straggler.compute", t0.Add(11*time.Second))},
		{logs: xidLogs(79, t0.Add(3*time.Second))},
		{traces: spans(rankSpan{rank: 3, host: testHost, gpu: "GPU-b", end: t0.Add(12 * time.Second), attrs: map[string]any{"training.loss": math.Inf(1)}})},
	}
	run := func(order []int, evalAt ...time.Duration) map[string]string {
		// incident_gap 0: each fault counts, so the node escalates too.
		c, sink, clock := newTestCorrelator(t, func(cfg *Config) { cfg.Mode, cfg.IncidentGap = ModeGateway, 0 })
		ctx := context.Background()
		for _, i := range order {
			in := inputs[i]
			switch {
			case in.traces != (ptrace.Traces{}):
				require.NoError(t, c.ConsumeTraces(ctx, in.traces))
			case in.metrics != (pmetric.Metrics{}):
				require.NoError(t, c.ConsumeMetrics(ctx, in.metrics))
			default:
				require.NoError(t, c.ConsumeLogs(ctx, in.logs))
			}
		}
		ids := map[string]string{}
		for _, d := range evalAt {
			clock.at = t0.Add(d)
			require.NoError(t, c.evaluate(ctx))
			for _, r := range faults(t, sink) {
				if r.State == fault.StateOpen {
					ids[string(r.Type)+" "+r.Entity.String()] = r.ID
				}
			}
		}
		return ids
	}
	// Replica A evaluates right after the data; replica B got it in another
	// order and evaluates 1.5 s later, twice.
	a := run([]int{0, 1, 2, 3, 4}, 12*time.Second, 13*time.Second)
	b := run([]int{3, 4, 2, 0, 1}, 13500*time.Millisecond, 14500*time.Millisecond)
	// nvlink.degraded and gpu.fell_off_bus on the GPU, straggler.compute on
	// the rank, gpu.memory.dbe on GPU-b, training.loss_nan on the job, and
	// node.repeated_faults on the node that had four of them.
	assert.Len(t, a, 6, "%v", a)
	assert.Equal(t, a, b)
}

// Thermal throttling opens on the third throttled scrape, whatever came
// before it in the window.
func TestThermalOpensOnThirdThrottledScrape(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()
	at := t0
	for i := 0; i < 6; i++ {
		require.NoError(t, c.ConsumeMetrics(ctx, dcgm(testHost, at, dcgmGPU{uuid: testGPU, tempC: 80, throttled: i >= 3})))
		clock.at = at.Add(time.Second) // one evaluation_interval after the scrape
		require.NoError(t, c.evaluate(ctx))
		got := byType(faults(t, sink), fault.TypeGPUThermal)
		if i < 5 {
			assert.Empty(t, got, "scrape %d", i)
		} else {
			require.Len(t, got, 1, "the third throttled scrape opens it")
			assert.True(t, got[0].LastSeen.Equal(at))
		}
		at = at.Add(10 * time.Second)
	}
}

func TestDefaultEvaluationIntervalIsOneSecond(t *testing.T) {
	assert.Equal(t, time.Second, createDefaultConfig().(*Config).EvaluationInterval)
}

// findingLogs is an NCCL flight-recorder finding as the ncclflight receiver
// writes it: the node and job on the resource, the ranks it names in
// nccl.ranks, no training.rank.
func findingLogs(kind string, ranks []any, at time.Time) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", "xl007")
	rl.Resource().Attributes().PutStr("training.job.id", testJob)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	lr.SetEventName("nccl.finding")
	lr.Attributes().PutStr("event.name", "nccl.finding")
	lr.Attributes().PutStr("nccl.finding", kind)
	if err := lr.Attributes().PutEmptySlice("nccl.ranks").FromRaw(ranks); err != nil {
		panic(err)
	}
	return ld
}

// A timeout finding opens its fault on the ranks it names, with the host
// their own spans gave; so does a hang (issue 20: the culprit rank's, no
// longer the job's), and the flight recorder's straggler opens
// straggler.compute on a rank that sends no step spans.
func TestNCCLFindingsOpenOnTheNamedRanks(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{rank: 58, host: "xl007", gpu: "GPU-58", end: t0})))
	require.NoError(t, c.ConsumeLogs(ctx, findingLogs("hang", []any{int64(58)}, t0.Add(time.Second))))
	require.NoError(t, c.ConsumeLogs(ctx, findingLogs("timeout", []any{int64(58), "bad"}, t0.Add(time.Second))))
	require.NoError(t, c.ConsumeLogs(ctx, findingLogs("straggler", []any{int64(9)}, t0.Add(time.Second))))
	clock.at = t0.Add(2 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	got := faults(t, sink)
	require.Len(t, got, 3, "%v", got)
	hang := byType(got, fault.TypeNCCLHang)
	require.Len(t, hang, 1)
	assert.Equal(t, fault.Entity{Kind: fault.EntityRank, Key: testJob + "/58"}, hang[0].Entity)
	straggler := byType(got, fault.TypeStragglerCompute)
	require.Len(t, straggler, 1)
	assert.Equal(t, fault.Entity{Kind: fault.EntityRank, Key: testJob + "/9"}, straggler[0].Entity)
	timeout := byType(got, fault.TypeNCCLTimeout)
	require.Len(t, timeout, 1)
	assert.Equal(t, fault.Entity{Kind: fault.EntityRank, Key: testJob + "/58"}, timeout[0].Entity)
	assert.Equal(t, "xl007", timeout[0].HostName, "from the rank's own span")
	assert.Equal(t, "GPU-58", timeout[0].GPUUUID)
}

// A node whose clock is two minutes behind the gateway's still sends: its
// liveness is measured on arrival, not on its spans' own times, so it is
// not silent (issue 20: node.silent opened on skewed nodes).
func TestNodeBehindInTimeIsNotSilent(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	const skew = -2 * time.Minute
	last := t0
	for at := t0; !at.After(t0.Add(4 * time.Minute)); at = at.Add(10 * time.Second) {
		clock.at, last = at, at
		require.NoError(t, c.ConsumeTraces(context.Background(), spans(
			rankSpan{job: testJob, rank: 0, host: "xl001", gpu: "GPU-xl001", end: at.Add(skew)},
			rankSpan{job: testJob, rank: 1, host: "xl002", gpu: "GPU-xl002", end: at})))
	}
	assert.Empty(t, silentNodes(t, c, sink, clock, last.Add(5*time.Second)))
}
