package stepspanprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// dpStep simulates one data-parallel step of 8 ranks whose backward
// overlaps the all-reduce of 4 gradient buckets: rank slow computes
// slowFactor x slower than its peers. Bucket k of a rank is enqueued when
// its backward has produced it; the all-reduce of bucket k completes, on
// every rank, once the last rank enqueued it and the previous bucket's
// all-reduce is done, plus the transfer. It returns each rank's collective
// spans (as the ncclflight receiver emits flight-recorder entries with
// CUDA-event timing) and the enqueue time of the slow rank's last bucket.
// A span starts at the bucket's enqueue, or with kernelStart at the
// all-reduce kernel's start as the watchdog discovers it: on the NCCL
// stream, after the previous all-reduce completed.
func dpStep(ranks, slow int, slowFactor float64, state string, kernelStart bool) (map[int][]ptrace.Traces, time.Time) {
	const (
		buckets  = 4
		forward  = 200 * time.Millisecond
		backward = 400 * time.Millisecond
		transfer = 20 * time.Millisecond
	)
	scale := func(r int, d time.Duration) time.Duration {
		if r == slow {
			return time.Duration(float64(d) * slowFactor)
		}
		return d
	}
	ready := func(r, k int) time.Time { // bucket k (1-based) ready on rank r
		return t0.Add(scale(r, forward) + scale(r, backward)*time.Duration(k)/buckets)
	}
	completion := make([]time.Time, buckets+1)
	completion[0] = t0
	for k := 1; k <= buckets; k++ {
		last := completion[k-1]
		for r := 0; r < ranks; r++ {
			if ready(r, k).After(last) {
				last = ready(r, k)
			}
		}
		completion[k] = last.Add(transfer)
	}
	out := map[int][]ptrace.Traces{}
	for r := 0; r < ranks; r++ {
		for k := 1; k <= buckets; k++ {
			enq := ready(r, k)
			if kernelStart && completion[k-1].After(enq) {
				enq = completion[k-1]
			}
			td := collectiveTraces(hostOf(r), int64(r), "nccl:all_reduce", enq, completion[k].Sub(enq), false)
			s := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			s.Attributes().PutStr(semconv.AttrNCCLState, state)
			if state != "completed" { // seen only scheduled: no times, status Error
				s.SetEndTimestamp(s.StartTimestamp())
				s.Status().SetCode(ptrace.StatusCodeError)
			}
			out[r] = append(out[r], td)
		}
	}
	return out, ready(slow, buckets)
}

func hostOf(rank int) string { return "node" + string(rune('a'+rank)) }

// runDPStep sends the step's collectives and each rank's step span (from t0
// to 2 s) and returns each rank's step span as sent on.
func runDPStep(t *testing.T, collectives map[int][]ptrace.Traces, ranks int) map[int64]ptrace.Span {
	t.Helper()
	p, sink := start(t, testConfig())
	ctx := context.Background()
	for r := 0; r < ranks; r++ {
		for _, td := range collectives[r] {
			require.NoError(t, p.ConsumeTraces(ctx, td))
		}
		require.NoError(t, p.ConsumeTraces(ctx, stepTraces("dp8", 0, 3, int64(r), hostOf(r), t0, t0.Add(2*time.Second))))
	}
	require.Eventually(t, func() bool { return len(sink.byName(semconv.SpanTrainStep)) == ranks }, 5*time.Second, 10*time.Millisecond)
	byRank := map[int64]ptrace.Span{}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for i, s := range sink.spans {
		if s.Name() == semconv.SpanTrainStep {
			rank, _ := sink.res[i].Get(semconv.AttrTrainingRank)
			byRank[rank.Int()] = s
		}
	}
	require.Len(t, byRank, ranks)
	return byRank
}

// A DP step whose backward overlaps 4 bucket all-reduces, one rank 2.35x
// slower: every healthy rank's tail is the time from its own last bucket to
// the slow rank's last bucket plus one transfer (the slow rank's extra
// compute); the slow rank waits only for its last transfer.
func TestTailIsTheExposedWait(t *testing.T) {
	const ranks, slow = 8, 5
	collectives, slowLast := dpStep(ranks, slow, 2.35, "completed", false)
	byRank := runDPStep(t, collectives, ranks)

	// Healthy: last bucket at 200+400 ms; slow: at 2.35 x 600 = 1410 ms.
	extra := slowLast.Sub(t0.Add(600 * time.Millisecond))
	require.Equal(t, 810*time.Millisecond, extra)
	for r := int64(0); r < ranks; r++ {
		v, ok := byRank[r].Attributes().Get(semconv.AttrCollectivesTailNs)
		require.True(t, ok, "rank %d: %s missing", r, semconv.AttrCollectivesTailNs)
		tail := time.Duration(v.Int())
		if r == slow {
			assert.Equal(t, 20*time.Millisecond, tail, "the slow rank waits for its last transfer only")
			continue
		}
		assert.Equal(t, extra+20*time.Millisecond, tail, "rank %d waits for the slow rank's extra compute and the transfer", r)
	}
}

// Entries seen only scheduled (no start or completion time) give no tail;
// neither does a step with one untimed collective among timed ones, nor a
// step without collectives.
func TestTailOnlyWithTimes(t *testing.T) {
	const ranks = 8
	scheduled, _ := dpStep(ranks, 5, 2.35, "scheduled", false)
	mixed, _ := dpStep(ranks, 5, 2.35, "completed", false)
	// Rank 2's third bucket: seen scheduled only.
	s := mixed[2][2].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	s.Attributes().PutStr(semconv.AttrNCCLState, "scheduled")
	s.SetEndTimestamp(s.StartTimestamp())
	s.Status().SetCode(ptrace.StatusCodeError)
	delete(mixed, 3) // rank 3: no collectives at all

	for name, c := range map[string]map[int][]ptrace.Traces{"scheduled": scheduled, "mixed": mixed} {
		byRank := runDPStep(t, c, ranks)
		for r := int64(0); r < ranks; r++ {
			_, ok := byRank[r].Attributes().Get(semconv.AttrCollectivesTailNs)
			want := name == "mixed" && r != 2 && r != 3
			assert.Equal(t, want, ok, "%s: rank %d has a tail: %v, want %v", name, r, ok, want)
		}
	}
}

// Spans that start at the kernel's start (TORCH_NCCL_ENABLE_TIMING: the
// watchdog's discovered start) rather than the enqueue: a healthy rank's
// last all-reduce queues behind the previous one on the NCCL stream, so its
// start is that one's completion, not the rank's readiness. The tail is
// then a lower bound of the exposed wait (here the slow rank's bucket
// interval, 235 ms, for a true 830 ms), still smallest on
// the slow rank; README.md says so.
func TestTailFromKernelStartsIsALowerBound(t *testing.T) {
	const ranks, slow = 8, 5
	collectives, _ := dpStep(ranks, slow, 2.35, "completed", true)
	byRank := runDPStep(t, collectives, ranks)
	for r := int64(0); r < ranks; r++ {
		v, ok := byRank[r].Attributes().Get(semconv.AttrCollectivesTailNs)
		require.True(t, ok, "rank %d", r)
		want := 235 * time.Millisecond // 1430 - 1195 ms: the slow rank's bucket interval, 940/4 ms
		if r == slow {
			want = 20 * time.Millisecond
		}
		assert.Equal(t, want, time.Duration(v.Int()), "rank %d", r)
	}
}
