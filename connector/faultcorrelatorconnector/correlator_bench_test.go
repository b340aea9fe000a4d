package faultcorrelatorconnector

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func newBenchCorrelator(b *testing.B, mode Mode) *correlator {
	b.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Mode = mode
	c, err := newCorrelator(cfg, testSettings(), new(consumertest.LogsSink))
	require.NoError(b, err)
	return c
}

// benchMetrics is one scrape of 8 nodes x 8 GPUs: per GPU 12 DCGM-style
// metrics, half of them read by no default rule.
func benchMetrics() (pmetric.Metrics, []pmetric.NumberDataPoint) {
	md := pmetric.NewMetrics()
	var points []pmetric.NumberDataPoint
	for n := 0; n < 8; n++ {
		for g := 0; g < 8; g++ {
			rm := md.ResourceMetrics().AppendEmpty()
			ra := rm.Resource().Attributes()
			ra.PutStr("host.name", "xl"+strconv.Itoa(n))
			ra.PutStr("gpu.uuid", "GPU-"+strconv.Itoa(n)+"-"+strconv.Itoa(g))
			ra.PutStr("k8s.pod.name", "trainer-"+strconv.Itoa(n))
			ms := rm.ScopeMetrics().AppendEmpty().Metrics()
			add := func(name string, cumulative bool, v float64, kv ...string) {
				m := ms.AppendEmpty()
				m.SetName(name)
				var dp pmetric.NumberDataPoint
				if cumulative {
					s := m.SetEmptySum()
					s.SetIsMonotonic(true)
					s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
					dp = s.DataPoints().AppendEmpty()
				} else {
					dp = m.SetEmptyGauge().DataPoints().AppendEmpty()
				}
				for i := 0; i+1 < len(kv); i += 2 {
					dp.Attributes().PutStr(kv[i], kv[i+1])
				}
				dp.SetDoubleValue(v)
				points = append(points, dp)
			}
			add("gpu.nvlink.errors", true, 12, "error.type", "crc_flit")
			add("gpu.ecc.errors", true, 0, "gpu.ecc.type", "dbe_volatile")
			add("gpu.ecc.errors", true, 3, "gpu.ecc.type", "sbe_volatile")
			add("hw.temperature", false, 70, "hw.sensor_location", "gpu")
			add("gpu.clock.throttle", false, 0, "gpu.throttle.reason", "hw_thermal_slowdown")
			add("gpu.clock.throttle", false, 0, "gpu.throttle.reason", "sw_thermal_slowdown")
			add("hw.gpu.utilization", false, 0.97, "hw.gpu.task", "general")
			add("hw.power", false, 650)
			add("hw.gpu.memory.usage", false, 7e10)
			add("gpu.clock.frequency", false, 1.98e9, "gpu.clock.domain", "sm")
			add("gpu.clock.frequency", false, 2.6e9, "gpu.clock.domain", "memory")
			add("gpu.pcie.throughput", false, 1e9, "network.io.direction", "receive")
		}
	}
	return md, points
}

// BenchmarkConsumeMetrics64GPUs: one gateway batch of 64 GPUs' scrape; each
// iteration is the next scrape, 10 s later.
func BenchmarkConsumeMetrics64GPUs(b *testing.B) {
	c := newBenchCorrelator(b, ModeGateway)
	md, points := benchMetrics()
	ctx := context.Background()
	at := t0
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(10 * time.Second)
		ts := pcommon.NewTimestampFromTime(at)
		for _, dp := range points {
			dp.SetTimestamp(ts)
		}
		if err := c.ConsumeMetrics(ctx, md); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStep is one step of a 1,024-rank job (128 nodes x 8 GPUs), each
// rank's train.step span with the attributes the stepspan processor adds.
func benchStep() ptrace.Traces {
	td := ptrace.NewTraces()
	for r := 0; r < 1024; r++ {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("service.name", "trainer")
		ra.PutStr("host.name", "xl"+strconv.Itoa(r/8))
		ra.PutStr("gpu.uuid", "GPU-"+strconv.Itoa(r))
		ra.PutStr("training.job.id", "llama-70b")
		ra.PutInt("training.rank", int64(r))
		ra.PutInt("training.world_size", 1024)
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("train.step")
		sp.SetTraceID(pcommon.TraceID{1})
		sp.SetSpanID(pcommon.SpanID{byte(r >> 8), byte(r)})
		a := sp.Attributes()
		a.PutInt("iteration.step", 1)
		a.PutInt("training.attempt", 0)
		a.PutDouble("training.loss", 2.1)
		for _, k := range []string{"dataload", "forward", "backward", "optimizer"} {
			a.PutInt("training.phase."+k+"_ns", 1_000_000_000)
		}
		a.PutInt("nccl.collectives.count", 48)
		a.PutInt("nccl.collectives.total_ns", 900_000_000)
		a.PutInt("nccl.collectives.max_ns", 90_000_000)
		a.PutStr("nccl.collectives.max_name", "nccl:all_reduce")
		a.PutInt("nccl.collectives.anomalies", 0)
		a.PutDouble("gpu.health.sm_active", 0.8)
		a.PutDouble("gpu.health.temperature", 71)
		a.PutInt("gpu.health.nvlink_crc_errors", 0)
		a.PutInt("gpu.health.ecc_sbe_errors", 0)
		a.PutInt("gpu.health.ecc_dbe_errors", 0)
		a.PutInt("ib.health.symbol_errors", 0)
		a.PutInt("ib.health.link_downed", 0)
		a.PutDouble("gpu.health.window_s", 60)
	}
	return td
}

// BenchmarkConsumeTraces1024Ranks: the train.step spans of one step of a
// 1,024-rank job reaching the gateway correlator; each iteration is the
// next step, 5 s later.
func BenchmarkConsumeTraces1024Ranks(b *testing.B) {
	c := newBenchCorrelator(b, ModeGateway)
	td := benchStep()
	ctx := context.Background()
	at := t0
	c.now = func() time.Time { return at.Add(time.Second) } // spans arrive a second after the step: their place in the windows
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(5 * time.Second)
		stepAt(td, at)
		if err := c.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStep: one evaluation of the correlator (rules, dedup, records)
// after 1,024 ranks on 128 nodes stepped for a minute and 64 GPUs were
// scraped: the work of each evaluation_interval tick in that gateway.
func BenchmarkStep(b *testing.B) {
	c := newBenchCorrelator(b, ModeGateway)
	ctx := context.Background()
	td := benchStep()
	md, points := benchMetrics()
	at := t0
	c.now = func() time.Time { return at.Add(time.Second) } // spans arrive a second after the step: their place in the windows
	for i := 0; i < 12; i++ {
		at = at.Add(5 * time.Second)
		ts := pcommon.NewTimestampFromTime(at)
		rss := td.ResourceSpans()
		for j := 0; j < rss.Len(); j++ {
			sp := rss.At(j).ScopeSpans().At(0).Spans().At(0)
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at.Add(-4 * time.Second)))
			sp.SetEndTimestamp(ts)
		}
		require.NoError(b, c.ConsumeTraces(ctx, td))
		for _, dp := range points {
			dp.SetTimestamp(ts)
		}
		require.NoError(b, c.ConsumeMetrics(ctx, md))
	}
	b.ReportAllocs()
	for b.Loop() {
		if recs := c.step(at.Add(time.Second)); len(recs) != 0 {
			b.Fatalf("%d fault records from healthy data, the first %+v", len(recs), recs[0])
		}
	}
}

// BenchmarkConsumeTraces1024RanksByNode: the step of BenchmarkConsumeTraces1024Ranks
// as the gateway's kafka receiver hands it on, one message per node (8 spans
// a batch): the per-batch work counts too.
func BenchmarkConsumeTraces1024RanksByNode(b *testing.B) {
	c := newBenchCorrelator(b, ModeGateway)
	step := benchStep()
	var batches []ptrace.Traces
	for i := 0; i < step.ResourceSpans().Len(); i += 8 {
		td := ptrace.NewTraces()
		for j := i; j < i+8; j++ {
			step.ResourceSpans().At(j).CopyTo(td.ResourceSpans().AppendEmpty())
		}
		batches = append(batches, td)
	}
	ctx := context.Background()
	at := t0
	c.now = func() time.Time { return at.Add(time.Second) } // spans arrive a second after the step: their place in the windows
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(5 * time.Second)
		for _, td := range batches {
			stepAt(td, at)
			if err := c.ConsumeTraces(ctx, td); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// stepAt moves every rank's step span (the first span of each resource)
// to a 4 s step ending at at: the next step of the benchmark's job.
func stepAt(td ptrace.Traces, at time.Time) {
	start, end := pcommon.NewTimestampFromTime(at.Add(-4*time.Second)), pcommon.NewTimestampFromTime(at)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sp := rss.At(i).ScopeSpans().At(0).Spans().At(0)
		sp.SetStartTimestamp(start)
		sp.SetEndTimestamp(end)
	}
}

// BenchmarkHandOff1024RanksByNode is BenchmarkConsumeTraces1024RanksByNode
// with the hand-off (handoff.go): handoff=off is a correlator not started,
// whose consume calls return once the input is ingested (the behaviour
// before it); handoff=on a started one, whose calls return once the
// evaluation that includes their input handed off its records (none, from
// healthy ranks), with the full evaluation on every 1 s tick as well. The
// 128 node batches of a step come from one Kafka partition (in turn) or
// eight (eight goroutines, whose requests share evaluations).
func BenchmarkHandOff1024RanksByNode(b *testing.B) {
	step := benchStep()
	var batches []ptrace.Traces
	for i := 0; i < step.ResourceSpans().Len(); i += 8 {
		td := ptrace.NewTraces()
		for j := i; j < i+8; j++ {
			step.ResourceSpans().At(j).CopyTo(td.ResourceSpans().AppendEmpty())
		}
		batches = append(batches, td)
	}
	for _, started := range []bool{false, true} {
		for _, partitions := range []int{1, 8} {
			name := "handoff=off"
			if started {
				name = "handoff=on"
			}
			b.Run(name+"/partitions="+strconv.Itoa(partitions), func(b *testing.B) {
				c := newBenchCorrelator(b, ModeGateway)
				var clock atomic.Int64 // the loop reads it: the step's end + 1 s
				c.now = func() time.Time { return time.Unix(0, clock.Load()) }
				ctx := context.Background()
				if started {
					require.NoError(b, c.Start(ctx, componenttest.NewNopHost()))
					defer func() { require.NoError(b, c.Shutdown(ctx)) }()
				}
				at := t0
				b.ReportAllocs()
				for b.Loop() {
					at = at.Add(5 * time.Second)
					for _, td := range batches {
						stepAt(td, at)
					}
					clock.Store(at.Add(time.Second).UnixNano())
					var wg sync.WaitGroup
					for p := 0; p < partitions; p++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := p; i < len(batches); i += partitions {
								if err := c.ConsumeTraces(ctx, batches[i]); err != nil {
									b.Error(err)
								}
							}
						}()
					}
					wg.Wait()
				}
			})
		}
	}
}
