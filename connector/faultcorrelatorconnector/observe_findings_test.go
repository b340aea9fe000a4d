package faultcorrelatorconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// A hang finding names its culprits, the collectives they never enqueued
// and their Python stacks (issue 20): one nccl.hang per culprit rank, each
// quoting its own collective and stack, however many nodes reported it.
func TestHangFindingNamesCulpritRankCollectiveAndStack(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	for _, host := range []string{"xl007", "xl008"} { // two nodes read the same dumps
		ld := findingLogs(semconv.NCCLFindingHang, []any{int64(4), int64(5)}, t0)
		rl := ld.ResourceLogs().At(0)
		rl.Resource().Attributes().PutStr("host.name", host)
		ev := rl.ScopeLogs().At(0).LogRecords().At(0).Attributes().PutEmptyMap(semconv.AttrNCCLEvidence)
		ev.PutStr("rank.4.stuck_collective", "pg 21:EXPERT_MODEL_PARALLEL_GROUP seq 79 nccl:all_to_all (last enqueued 78; entered by {0, 2, 6})")
		ev.PutStr("rank.4.python_stack", "all_to_all_single (torch/distributed/distributed_c10d.py:4378); forward (megatron/core/transformer/moe/moe_layer.py:144)")
		ev.PutStr("rank.5.stuck_collective", "pg 22:EXPERT_MODEL_PARALLEL_GROUP seq 79 nccl:all_to_all (last enqueued 78; entered by {1, 3, 7})")
		require.NoError(t, c.ConsumeLogs(ctx, ld))
	}
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	hangs := byType(faults(t, sink), fault.TypeNCCLHang)
	require.Len(t, hangs, 2, "%v", hangs)
	byRank := map[string]fault.Record{}
	for _, h := range hangs {
		require.Equal(t, fault.EntityRank, h.Entity.Kind)
		byRank[h.Entity.Key] = h
	}
	r4, ok := byRank[testJob+"/4"]
	require.True(t, ok)
	coll, ok := evidence(r4, semconv.SignalNCCLHangCollective)
	require.True(t, ok)
	assert.Contains(t, coll.Text, "seq 79 nccl:all_to_all")
	assert.Contains(t, coll.Text, "EXPERT_MODEL_PARALLEL_GROUP")
	stack, ok := evidence(r4, semconv.SignalNCCLHangStack)
	require.True(t, ok)
	assert.Contains(t, stack.Text, "moe_layer.py:144")
	r5, ok := byRank[testJob+"/5"]
	require.True(t, ok)
	coll, ok = evidence(r5, semconv.SignalNCCLHangCollective)
	require.True(t, ok)
	assert.Contains(t, coll.Text, "pg 22:")
	_, ok = evidence(r5, semconv.SignalNCCLHangStack)
	assert.False(t, ok, "rank 5's dump had no frames: the fault opens without a stack")
}

// A finding that reaches the gateway long after it was made (consumer lag)
// is placed in the rule windows at its arrival: its fault still opens, and
// the evidence keeps the finding's own time.
func TestLateFindingOpensAtArrival(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	made := t0
	arrival := t0.Add(20 * time.Minute) // older than the nccl_hang window (5m)
	clock.at = arrival
	require.NoError(t, c.ConsumeLogs(ctx, findingLogs(semconv.NCCLFindingHang, []any{int64(4)}, made)))
	clock.at = arrival.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	hangs := byType(faults(t, sink), fault.TypeNCCLHang)
	require.Len(t, hangs, 1)
	ev, ok := evidence(hangs[0], semconv.AttrNCCLFinding)
	require.True(t, ok)
	assert.True(t, ev.Time.Equal(made), "evidence time %v, the finding was made at %v", ev.Time, made)
}

// The flight recorder's straggler is a compute straggler on its own only
// for a rank that sends no step spans: step spans that do not confirm it
// contradict it.
func TestFlightRecorderStragglerNeedsNoContradiction(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{rank: 9, host: "xl007", gpu: "GPU-9", end: t0})))
	require.NoError(t, c.ConsumeLogs(ctx, findingLogs(semconv.NCCLFindingStraggler, []any{int64(9)}, t0)))
	require.NoError(t, c.ConsumeLogs(ctx, findingLogs(semconv.NCCLFindingStraggler, []any{int64(10)}, t0)))
	// Rank 11 sends no step span, only the collective spans the agent's
	// flight recorder makes of its dumps: a flight-recorder-only rank.
	require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{name: "nccl:all_reduce", rank: 11, host: "xl007", gpu: "GPU-11", end: t0,
		attrs: map[string]any{"nccl.collective": "all_reduce"}})))
	require.NoError(t, c.ConsumeLogs(ctx, findingLogs(semconv.NCCLFindingStraggler, []any{int64(11)}, t0)))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	got := byType(faults(t, sink), fault.TypeStragglerCompute)
	require.Len(t, got, 2, "%v", got)
	for _, r := range got {
		assert.NotEqual(t, testJob+"/9", r.Entity.Key, "rank 9's step spans say nothing is wrong")
		assert.Equal(t, "nccl_straggler", r.Rule)
	}
}

// A missing_ranks finding (no dump times, or ranks not yet stopped) may
// name bystanders whose dumps were read before they reached the collective
// (issue 20): it opens the job's hang, quoting the collective and the ranks
// missing from it, and no rank's.
func TestMissingRanksFindingOpensTheJobsHang(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, gateway)
	ctx := context.Background()
	ld := findingLogs(semconv.NCCLFindingMissingRanks, []any{int64(2), int64(5)}, t0)
	a := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes()
	a.PutStr(semconv.AttrNCCLPGName, "0")
	a.PutStr(semconv.AttrNCCLPGDesc, "default_pg")
	a.PutInt(semconv.AttrNCCLCollectiveSeq, 17)
	a.PutStr(semconv.AttrNCCLCollective, "all_reduce")
	require.NoError(t, c.ConsumeLogs(ctx, ld))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	hangs := byType(faults(t, sink), fault.TypeNCCLHang)
	require.Len(t, hangs, 1, "%v", hangs)
	assert.Equal(t, fault.Entity{Kind: fault.EntityJob, Key: testJob}, hangs[0].Entity)
	assert.Equal(t, "nccl_hang_missing_ranks", hangs[0].Rule)
	coll, ok := evidence(hangs[0], semconv.SignalNCCLHangCollective)
	require.True(t, ok)
	assert.Equal(t, "pg 0:default_pg seq 17 all_reduce; missing ranks 2,5", coll.Text)
}

// An agent speaks only for its own node: a finding from one node naming a
// rank whose step spans came from another node (a forged dump, or dump
// directories shared between nodes) is not attributed; the refusal is
// counted and logged, and the rank's own node gets no fault from it.
func TestFindingCannotNameAnotherNodesRank(t *testing.T) {
	c, sink, clock, reader, logs := telemetryCorrelator(t)
	ctx := context.Background()
	require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{rank: 3, host: "xl001", gpu: "GPU-3", end: t0})))
	forged := findingLogs(semconv.NCCLFindingHang, []any{int64(3), int64(4)}, t0) // reported by xl007
	require.NoError(t, c.ConsumeLogs(ctx, forged))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))

	hangs := byType(faults(t, sink), fault.TypeNCCLHang)
	require.Len(t, hangs, 1, "only rank 4, whose dump xl007 could have read: %v", hangs)
	assert.Equal(t, testJob+"/4", hangs[0].Entity.Key)
	assert.Equal(t, "xl007", hangs[0].HostName, "a rank named by a finding is the reporter's")

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	refused := int64(-1)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "otelcol_faultcorrelator_finding_ranks_refused" {
				refused = m.Data.(metricdata.Sum[int64]).DataPoints[0].Value
			}
		}
	}
	assert.Equal(t, int64(1), refused)
	assert.Equal(t, 1, logs.FilterMessageSnippet("another node").Len())
}
