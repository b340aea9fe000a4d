package faultcorrelatorconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

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
		clock.at = at // arrives as it ends: the gateway places span samples at their arrival
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
