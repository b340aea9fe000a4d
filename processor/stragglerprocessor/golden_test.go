package stragglerprocessor

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// The spans this processor derives, as the gateway sends them on: an
// 8-rank job in two pipeline stages whose rank 5 computes 2.3 s where its
// stage takes about 1 s, over six steps (the sixth a slow one, a
// checkpoint of every rank). Every step gets its root; rank 5 gets a
// verdict span, flagged at first, straggler.compute once persistent.
func TestGoldenRootAndVerdictSpans(t *testing.T) {
	h := newHarness(t, defaultConfig())
	const job, attempt = "llama-70b", int64(1)
	for step := int64(1); step <= 6; step++ {
		start := t0.Add(time.Duration(step) * 10 * time.Second)
		stepDur := 2500 * time.Millisecond
		if step == 6 {
			stepDur = 9 * time.Second
		}
		for r := int64(0); r < 8; r++ {
			c := healthyCompute(r)
			if r == 5 {
				c = 2300 * time.Millisecond
			}
			h.send(t, rank{job: job, attempt: attempt, step: step, rank: r, worldSize: 8, ppStage: r / 4,
				start: start.Add(time.Duration(r) * time.Millisecond), duration: stepDur, compute: c, wait: stepDur - c})
		}
	}
	roots, verdicts := ptrace.NewTraces(), ptrace.NewTraces()
	for _, td := range h.sink.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			ss := rs.ScopeSpans().At(0)
			var to ptrace.Traces
			switch ss.Spans().At(0).Name() {
			case "train.step.root":
				to = roots
			case "train.step.verdict":
				to = verdicts
			default:
				continue // the rank spans, passed on as they came
			}
			rs.CopyTo(to.ResourceSpans().AppendEmpty())
		}
	}
	require.Equal(t, 6, roots.SpanCount())
	require.Equal(t, 6, verdicts.SpanCount())
	compareGolden(t, "root_spans.yaml", roots)
	compareGolden(t, "verdict_spans.yaml", verdicts)
}

func compareGolden(t *testing.T, name string, actual ptrace.Traces) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, golden.WriteTraces(t, path, actual))
	}
	expected, err := golden.ReadTraces(path)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(expected, actual, ptracetest.IgnoreResourceSpansOrder(), ptracetest.IgnoreSpansOrder()))
}
