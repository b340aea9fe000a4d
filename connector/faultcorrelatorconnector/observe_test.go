package faultcorrelatorconnector

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
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

func TestGPUResponsiveAgainIsNoHang(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("gpu.uuid", testGPU)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0))
	lr.SetEventName("gpu.unresponsive")
	lr.Attributes().PutBool("gpu.unresponsive", false)
	require.NoError(t, c.ConsumeLogs(context.Background(), ld))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(context.Background()))
	assert.Empty(t, faults(t, sink))

	lr.Attributes().PutBool("gpu.unresponsive", true)
	require.NoError(t, c.ConsumeLogs(context.Background(), ld))
	require.NoError(t, c.evaluate(context.Background()))
	got := faults(t, sink)
	require.Len(t, got, 1)
	assert.Equal(t, fault.TypeGPUUnresponsive, got[0].Type)
}

func stragglerSpan(verdict string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("host.name", testHost)
	rs.Resource().Attributes().PutStr("training.job.id", "llama-70b")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("train.step")
	sp.SetTraceID(pcommon.TraceID{0x4b, 0xf9, 1})
	sp.SetSpanID(pcommon.SpanID{0x00, 0xf0, 2})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(-2 * time.Second)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0))
	sp.Attributes().PutInt("training.rank", 1045)
	sp.Attributes().PutStr("straggler.verdict", verdict)
	return td
}

func TestGatewayStragglerVerdictBecomesFault(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, func(cfg *Config) { cfg.Mode = ModeGateway })
	require.NoError(t, c.ConsumeTraces(context.Background(), stragglerSpan("straggler.compute")))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(context.Background()))
	got := faults(t, sink)
	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, fault.TypeStragglerCompute, r.Type)
	assert.Equal(t, fault.Entity{Kind: fault.EntityRank, Key: "llama-70b/1045"}, r.Entity)
	assert.Equal(t, "llama-70b", r.JobID)
	assert.True(t, r.RankKnown)
	assert.Equal(t, int64(1045), r.Rank)
	require.Len(t, r.Evidence, 1)
	assert.Equal(t, pcommon.TraceID{0x4b, 0xf9, 1}, r.Evidence[0].TraceID)
	assert.Equal(t, "straggler.compute", r.Evidence[0].Text)
}

func TestAgentIgnoresSpans(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	require.NoError(t, c.ConsumeTraces(context.Background(), stragglerSpan("straggler.compute")))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(context.Background()))
	assert.Empty(t, faults(t, sink))
}

func TestRememberCoarseAndRepeatedIdentities(t *testing.T) {
	c, _, _ := newTestCorrelator(t, nil)
	node := fault.Entity{Kind: fault.EntityNode, Key: testHost}
	job := fault.Entity{Kind: fault.EntityJob, Key: testJob}
	rank := fault.Entity{Kind: fault.EntityRank, Key: testJob + "/0"}
	for r := int64(0); r < 3; r++ {
		w := where{host: testHost, gpu: "GPU-" + strconv.FormatInt(r, 10), job: testJob, rank: r, rankKnown: true}
		c.remember(node, w)
		c.remember(job, w)
	}
	assert.Equal(t, where{host: testHost}, c.info[node], "a node carries no GPU, job or rank")
	assert.Equal(t, where{job: testJob}, c.info[job], "a job carries no host, GPU or rank")

	// A verdict span without the GPU keeps the one the step spans named,
	// also when it repeats; a changed identity after a repeat is stored.
	step := where{host: testHost, gpu: "GPU-0", job: testJob, rankKnown: true}
	c.remember(rank, step)
	for i := 0; i < 2; i++ {
		c.remember(rank, where{job: testJob, rankKnown: true})
		assert.Equal(t, step, c.info[rank])
	}
	moved := where{host: "xl009", gpu: "GPU-9", job: testJob, rankKnown: true}
	c.remember(rank, moved)
	assert.Equal(t, moved, c.info[rank])
	c.remember(rank, step)
	assert.Equal(t, step, c.info[rank], "the identity before the last one is not mistaken for a repeat")
}

// A GPU's fault record names the job and rank its spans named, even when
// the GPU's metrics (which name neither) arrived last; a new job's span
// replaces them.
func TestGPUKeepsTheJobItsSpansNamed(t *testing.T) {
	c, _, _ := newTestCorrelator(t, nil)
	gpu := fault.Entity{Kind: fault.EntityGPU, Key: "GPU-6"}
	span := where{host: testHost, gpu: "GPU-6", job: testJob, rank: 22, rankKnown: true}
	c.remember(gpu, span)
	c.remember(gpu, where{host: testHost, gpu: "GPU-6"}) // a scrape
	assert.Equal(t, span, c.info[gpu])
	next := where{host: testHost, gpu: "GPU-6", job: "job-2", rank: 3, rankKnown: true}
	c.remember(gpu, next)
	c.remember(gpu, where{host: testHost, gpu: "GPU-6"})
	assert.Equal(t, next, c.info[gpu])
}

func TestActivityKeepsLatestPerHostAndJob(t *testing.T) {
	c, _, _ := newTestCorrelator(t, func(cfg *Config) { cfg.Mode = ModeGateway })
	a := c.newActivity()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a.saw(where{host: "a", job: "j"}, at(2))
	a.saw(where{host: "a", job: "j"}, at(1)) // older: changes nothing
	a.saw(where{host: "b", job: "j"}, at(3))
	a.saw(where{host: "a", job: "k"}, at(1))
	a.saw(where{host: "a", job: "j"}, at(5))
	a.saw(where{host: "b"}, at(0))
	assert.Equal(t, map[string]time.Time{"a": at(5), "b": at(3)}, a.hosts)
	assert.Equal(t, map[string]time.Time{"j": at(5), "k": at(1)}, a.jobs)

	for _, h := range []string{"a", "a", "b", "a"} {
		a.sawRank(where{host: h, job: "j", rankKnown: true})
	}
	a.sawRank(where{host: "c", job: "j"}) // no rank: not a rank span
	assert.Equal(t, map[hostJob]struct{}{{"a", "j"}: {}, {"b", "j"}: {}}, a.ranks)
}

// The step span's numbers a custom rule reads are observed, though no
// default rule reads them: what is skipped follows the loaded rules.
func TestStepSpanNumbersFollowTheRules(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, func(cfg *Config) {
		cfg.Mode = ModeGateway
		cfg.Rules = "rules:\n  - {name: nccl_anomalies, fault_type: nccl.timeout, severity: P3, action: none, blast_radius: node, confidence: 0.5, entity: rank, window: 5m, all: [{signal: nccl.collectives.anomalies, agg: max, op: \">=\", value: 2}]}\n"
	})
	ctx := context.Background()
	require.NoError(t, c.ConsumeTraces(ctx, spans(
		rankSpan{rank: 3, host: testHost, gpu: testGPU, end: t0, attrs: map[string]any{"nccl.collectives.anomalies": int64(1)}},
		rankSpan{rank: 4, host: testHost, gpu: "GPU-4", end: t0, attrs: map[string]any{"nccl.collectives.anomalies": int64(2)}},
	)))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	got := faults(t, sink)
	require.Len(t, got, 1)
	assert.Equal(t, "nccl_anomalies", got[0].Rule)
	assert.Equal(t, fault.Entity{Kind: fault.EntityRank, Key: testJob + "/4"}, got[0].Entity)
	assert.Equal(t, "GPU-4", got[0].GPUUUID)
	assert.Equal(t, testHost, got[0].HostName)
}

// Identities live for one to two generations after they were last
// remembered: a gateway that saw max_entities ranks of finished jobs still
// learns where the ranks of a new job run.
func TestIdentitiesOfSilentEntitiesAreForgotten(t *testing.T) {
	c, _, _ := newTestCorrelator(t, func(cfg *Config) { cfg.Mode = ModeGateway; cfg.MaxEntities = 4 })
	rank := func(job string, r int64) (fault.Entity, where) {
		return fault.Entity{Kind: fault.EntityRank, Key: rankKey(job, r)},
			where{host: testHost, gpu: "GPU-" + strconv.FormatInt(r, 10), job: job, rank: r, rankKnown: true}
	}
	known := func(job string, r int64) bool {
		e, _ := rank(job, r)
		_, ok := c.identity(e)
		return ok
	}
	c.step(t0)
	for r := int64(0); r < 4; r++ {
		c.remember(rank("old-job", r))
	}
	c.remember(rank("new-job", 0))
	assert.False(t, known("new-job", 0), "max_entities identities held")

	c.step(t0.Add(identityGeneration))
	c.remember(rank("new-job", 0))
	c.remember(rank("old-job", 0)) // still running
	assert.True(t, known("new-job", 0), "a new generation has room")
	old3, _ := rank("old-job", 3)
	assert.Contains(t, c.infoOld, old3, "the last generation is still known") // (a lookup would move it)

	c.step(t0.Add(2 * identityGeneration))
	assert.True(t, known("new-job", 0))
	assert.True(t, known("old-job", 0))
	for r := int64(1); r < 4; r++ {
		assert.False(t, known("old-job", r), "rank %d silent for a whole generation", r)
	}
	gpu, w := rank("new-job", 0)
	got, _ := c.identity(gpu)
	assert.Equal(t, w, got)

	// A node's or a job's record still names it once its identity is gone.
	node := c.record(rules.Match{Entity: fault.Entity{Kind: fault.EntityNode, Key: "xl999"}}, t0)
	assert.Equal(t, "xl999", node.HostName)
	job := c.record(rules.Match{Entity: fault.Entity{Kind: fault.EntityJob, Key: "gone-job"}}, t0)
	assert.Equal(t, "gone-job", job.JobID)
}

// A rank's step spans are observed through the entities its last step span
// gave (rankState), skipping identity updates that would change nothing.
// When the rank moves, when identities rotate and when the evaluator has
// forgotten its entities, its samples and identity still follow it.
func TestRankStepSpansFollowTheRank(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	rank := fault.Entity{Kind: fault.EntityRank, Key: testJob + "/5"}
	step := func(at time.Time, host, gpu string, attrs map[string]any) {
		t.Helper()
		require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{rank: 5, host: host, gpu: gpu, end: at, attrs: attrs})))
	}
	identity := func() where {
		t.Helper()
		w, ok := c.identity(rank)
		require.True(t, ok, "the rank's identity is known")
		return w
	}
	c.step(t0)
	step(t0, "xa", "GPU-a", nil)
	step(t0.Add(time.Second), "xa", "GPU-a", nil)
	assert.Equal(t, where{host: "xa", gpu: "GPU-a", job: testJob, rank: 5, rankKnown: true}, identity())

	// Restarted elsewhere under the same job and rank.
	moved := where{host: "xb", gpu: "GPU-b", job: testJob, rank: 5, rankKnown: true}
	step(t0.Add(2*time.Second), "xb", "GPU-b", nil)
	assert.Equal(t, moved, identity())

	// Spans that repeat the identity still move it into each new generation.
	warm := map[string]any{"gpu.health.temperature": 61.0} // a sample the GPU keeps
	for g := 1; g <= 2; g++ {
		now := t0.Add(time.Duration(g) * identityGeneration)
		c.step(now)
		step(now.Add(time.Second), "xb", "GPU-b", warm)
	}
	assert.Equal(t, moved, identity(), "kept across two rotations")

	// Silent long enough for the evaluator to forget the rank's entities:
	// the next span's samples are kept under them again.
	later := t0.Add(5 * identityGeneration)
	for _, k := range []fault.EntityKind{fault.EntityGPU, fault.EntityRank, fault.EntityJob} {
		require.Less(t, c.eval.ForgetAfter(k), 2*identityGeneration, "%s entities are forgotten by then", k)
	}
	c.step(later)
	step(later.Add(time.Second), "xb", "GPU-b", map[string]any{"gpu.health.ecc_dbe_errors": int64(1), "gpu.health.window_s": 60.0})
	clock.at = later.Add(2 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	var dbe []fault.Record
	for _, r := range faults(t, sink) { // and node.silent for xa, which the rank left
		if r.Type == fault.TypeGPUMemoryDBE {
			dbe = append(dbe, r)
		}
	}
	require.Len(t, dbe, 1)
	assert.Equal(t, fault.Entity{Kind: fault.EntityGPU, Key: "GPU-b"}, dbe[0].Entity)
	assert.Equal(t, "xb", dbe[0].HostName)
	assert.Equal(t, testJob, dbe[0].JobID)
	assert.Equal(t, int64(5), dbe[0].Rank)
}
