//go:build e2e

package loadtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// The throughput harness at a small size, both configurations: everything
// produced is consumed by every consumer group, every metric point and log
// record reaches its backend, and the spans that tail sampling must keep
// (failed steps, steps with health evidence, the straggler's verdicts)
// arrive whole while the rest is sampled near the configured 10 %.
func TestGatewayHarnessLosesNothing(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(root, "bin", "otelcol-gpu-gateway")
	_, err = os.Stat(bin)
	require.NoError(t, err, "run `make build` first")

	shape := DefaultShape()
	shape.Jobs, shape.NodesPerJob = 4, 2 // 16 ranks a job
	const steps = 600                    // 3 failed steps a job
	ranks := shape.ranks()
	opts := GatewayOptions{
		Binary: bin, ConfigPath: filepath.Join(root, "distributions", "gateway", "config.yaml"),
		Spans: steps * shape.Jobs * ranks, Points: 40_000, Logs: 4_000,
		Shape: shape, Partitions: 3, Dir: t.TempDir(), Progress: testWriter{t},
	}
	c, err := CompareGateway(context.Background(), opts, "")
	require.NoError(t, err)
	var report strings.Builder
	c.WriteMarkdown(&report)
	t.Log("\n" + report.String())

	for _, run := range []GatewayRun{c.Full, c.ContribOnly} {
		assert.Zero(t, run.BadRequests, "%s: requests the sinks could not decode", run.Config)
		for _, sig := range []string{"points", "logs"} {
			p := run.Phase(sig)
			assert.Positive(t, p.Produced)
			assert.GreaterOrEqual(t, p.Arrived, int64(p.Produced), "%s: %s lost on the way to the backend", run.Config, sig)
		}
		p := run.Phase("spans")
		require.Equal(t, opts.Spans, p.Produced)
		if !run.TailSampling {
			assert.GreaterOrEqual(t, p.Spans.RankSpans, int64(p.Produced), "%s: rank spans lost without sampling", run.Config)
			continue
		}
		assert.Positive(t, p.Errors)
		assert.GreaterOrEqual(t, p.Spans.Errors, int64(p.Errors), "%s: every failed step's span reaches Tempo", run.Config)
		var plain, plainKept int
		for j := 0; j < shape.Jobs; j++ {
			for s := 0; s < steps; s++ {
				got := p.Spans.RankSpansOf[steprecord.TraceID(shape.jobID(j), 0, int64(s))]
				switch {
				case isSlowStep(j, s) && run.Config == "full":
					assert.Equal(t, ranks, got, "full: job %d's slow step %d must be kept whole", j, s)
				case isSlowStep(j, s):
					// no straggler processor, no step.slow: sampled
				case IsErrorStep(j, s) || isEvidenceStep(j, s):
					assert.Equal(t, ranks, got, "%s: job %d step %d must be kept whole", run.Config, j, s)
				case j == stragglerJob:
					// the straggler's steps: kept by its verdicts (full) or
					// sampled (contrib-only, no straggler processor)
				default:
					plain++
					if got > 0 {
						plainKept++
						assert.Equal(t, ranks, got, "%s: a sampled step is kept whole", run.Config)
					}
				}
			}
		}
		rate := float64(plainKept) / float64(plain)
		t.Logf("%s: %d of %d ordinary step traces kept (%.1f %%)", run.Config, plainKept, plain, 100*rate)
		assert.InDelta(t, 0.10, rate, 0.04, "%s: the baseline policy keeps about 10 %% of ordinary steps", run.Config)
	}
	full := c.Full.Phase("spans").Spans
	assert.Positive(t, full.Verdicts, "the straggler's verdict spans reach Tempo")
	assert.Positive(t, full.SlowRoots, "slow steps' root spans reach Tempo")
	for s := stragglerFrom + 8; s < steps; s++ {
		// once persistent, every step of the straggler's job carries a
		// verdict, so its trace is kept whole
		if got := full.RankSpansOf[steprecord.TraceID(shape.jobID(stragglerJob), 0, int64(s))]; got != ranks {
			t.Errorf("full: straggler job step %d: %d rank spans at Tempo, want %d", s, got, ranks)
			break
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
