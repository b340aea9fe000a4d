package testbed

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// smallScenario: one job of 2 nodes x 8 GPUs, 3 steps, 2 pipeline stages.
const smallScenario = `
defaults: {nodes: 2, gpus_per_node: 8, steps: 3, jitter: 0.03}
scenarios:
  - name: small
    hard_negative: true
    noise: {pp_stages: [1.0, 1.1]}
`

// The OTLP step spans are built from the step records: every value of a
// record is on its span, in the order the spans always had.
func TestStepSpansAreTheRecords(t *testing.T) {
	scs, err := parseScenarios([]byte(smallScenario))
	require.NoError(t, err)
	j := newJob(scs[0], "7", 42)
	start := time.Unix(1_790_000_000, 123)
	end := start.Add(900 * time.Millisecond)
	ranks := j.simulateStep(4)
	nodes := j.stepRecords(4, start, end, ranks, true)
	require.Len(t, nodes, 2)
	batches := stepSpans(nodes)
	require.Len(t, batches, 2)
	for n, b := range batches {
		assert.Equal(t, nodes[n].host, b.host)
		require.Equal(t, 8, b.td.ResourceSpans().Len())
		for i, rec := range nodes[n].records {
			assert.Equal(t, j.id, rec.JobID)
			assert.Equal(t, n*8+i, rec.Rank)
			assert.Equal(t, i, rec.LocalRank)
			assert.Equal(t, 16, rec.WorldSize)
			assert.Equal(t, j.gpuUUID(n, i), rec.GPUUUID)
			assert.True(t, rec.HasPPStage)
			assert.Equal(t, n, rec.PPStage, "rank %d", rec.Rank)
			require.Len(t, rec.Phases, 4)
			assert.Equal(t, ranks[rec.Rank].phases[1], rec.Phases[1].Duration)

			rs := b.td.ResourceSpans().At(i)
			assert.Equal(t, map[string]any{
				"service.name": "train", "host.name": rec.Host, "training.job.id": rec.JobID,
				"training.rank": int64(rec.Rank), "training.local_rank": int64(rec.LocalRank),
				"training.world_size": int64(16), "gpu.uuid": rec.GPUUUID, "training.pp_stage": int64(rec.PPStage),
			}, rs.Resource().Attributes().AsRaw())
			sp := rs.ScopeSpans().At(0).Spans().At(0)
			assert.Equal(t, "train.step", sp.Name())
			assert.Equal(t, pcommon.NewTimestampFromTime(start), sp.StartTimestamp())
			assert.Equal(t, pcommon.NewTimestampFromTime(end), sp.EndTimestamp())
			var keys []string
			sp.Attributes().Range(func(k string, _ pcommon.Value) bool {
				keys = append(keys, k)
				return true
			})
			// issue 20: the phases are compute only, which the phase contract
			// declares with training.phase.comm_wait_ns
			assert.Equal(t, []string{"iteration.step", "training.phase.dataload_ns", "training.phase.forward_ns",
				"training.phase.backward_ns", "training.phase.optimizer_ns", "training.loss",
				"training.phase.comm_wait_ns", "nccl.collectives.count", "nccl.collectives.total_ns"}, keys)
			raw := sp.Attributes().AsRaw()
			assert.Equal(t, int64(4), raw["iteration.step"])
			for _, ph := range rec.Phases {
				assert.Equal(t, int64(ph.Duration), raw["training.phase."+ph.Name+"_ns"])
			}
			assert.Equal(t, rec.Loss, raw["training.loss"])
			assert.Equal(t, rec.Attributes[2].Value, raw["nccl.collectives.total_ns"])
			assert.Positive(t, rec.Attributes[2].Value)
			assert.Equal(t, int64(ranks[rec.Rank].commWait), raw["training.phase.comm_wait_ns"])
		}
	}
}

// With a StepSink the records go to it and nothing is posted; without one
// the same steps arrive as OTLP step spans.
func TestDriveThroughTheSinkOrOTLP(t *testing.T) {
	run := func(t *testing.T, opts Options, url func(string) string) []StepDone {
		opts.ScenariosYAML = []byte(smallScenario)
		opts.StepPeriod = 5 * time.Millisecond
		opts.Dir = t.TempDir()
		var mu sync.Mutex
		var done []StepDone
		opts.OnStep = func(s StepDone) {
			mu.Lock()
			defer mu.Unlock()
			done = append(done, s)
		}
		c, err := NewCluster(opts)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.Drive(context.Background(), url))
		return done
	}

	t.Run("sink", func(t *testing.T) {
		type call struct {
			host    string
			records []StepRecord
		}
		var calls []call // Drive runs one goroutine per job: one job here
		opts := Options{StepSink: func(_ context.Context, host string, records []StepRecord) error {
			calls = append(calls, call{host, records})
			return nil
		}}
		done := run(t, opts, func(host string) string {
			t.Errorf("the OTLP sender was asked for %s's URL with a sink set", host)
			return ""
		})
		require.Len(t, calls, 6) // 3 steps x 2 nodes
		for i, c := range calls {
			assert.Equal(t, []string{"small-n0", "small-n1"}[i%2], c.host)
			require.Len(t, c.records, 8)
			for _, rec := range c.records {
				assert.Equal(t, i/2, rec.Step)
				assert.Equal(t, c.host, rec.Host)
				assert.True(t, rec.End.After(rec.Start))
				// 64-rank inputs: the collectives are in the flight recorder; the
				// span carries only the comm wait of the phase contract (issue 20)
				require.Len(t, rec.Attributes, 1, "64-rank inputs: the collectives are in the flight recorder")
				assert.Equal(t, "training.phase.comm_wait_ns", rec.Attributes[0].Key)
			}
		}
		require.Len(t, done, 3)
		for _, s := range done {
			assert.Equal(t, 16, s.Spans)
		}
	})

	t.Run("otlp", func(t *testing.T) {
		var mu sync.Mutex
		spans := map[int64]int{} // step -> spans
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			req := ptraceotlp.NewExportRequest()
			if err == nil {
				err = req.UnmarshalProto(body)
			}
			if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
				t.Errorf("step spans: %v, content type %q", err, r.Header.Get("Content-Type"))
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			rss := req.Traces().ResourceSpans()
			mu.Lock()
			for i := 0; i < rss.Len(); i++ {
				sp := rss.At(i).ScopeSpans().At(0).Spans().At(0)
				step, _ := sp.Attributes().Get("iteration.step")
				spans[step.Int()]++
				if sp.Kind() != ptrace.SpanKindInternal || sp.Name() != "train.step" {
					t.Errorf("span %q kind %v", sp.Name(), sp.Kind())
				}
			}
			mu.Unlock()
		}))
		defer srv.Close()
		done := run(t, Options{}, func(string) string { return srv.URL + "/v1/traces" })
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, map[int64]int{0: 16, 1: 16, 2: 16}, spans)
		require.Len(t, done, 3)
		assert.Equal(t, 16, done[2].Spans)
	})
}

// A step ends where the next begins however late the driving goroutine
// wakes: on a busy machine a step that ended when the goroutine got round
// to it overlapped its successor, and stepspan folded the successor's
// first collectives into it (straggler.link on hard negatives, issue 30).
func TestLateStepsDoNotOverlap(t *testing.T) {
	const period = 5 * time.Millisecond
	type key struct {
		host string
		rank int
	}
	var mu sync.Mutex
	steps := map[key][]StepRecord{}
	opts := Options{ScenariosYAML: []byte(smallScenario), StepPeriod: period, Dir: t.TempDir(),
		StepSink: func(_ context.Context, host string, records []StepRecord) error {
			time.Sleep(3 * period) // later than the next step's start
			mu.Lock()
			defer mu.Unlock()
			for _, rec := range records {
				steps[key{host, rec.Rank}] = append(steps[key{host, rec.Rank}], rec)
			}
			return nil
		}}
	c, err := NewCluster(opts)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Drive(context.Background(), func(string) string { return "" }))
	require.Len(t, steps, 16)
	for k, recs := range steps {
		require.Len(t, recs, 3, "%v", k)
		for i := 1; i < len(recs); i++ {
			assert.False(t, recs[i-1].End.After(recs[i].Start), "%v: step %d ends %s after step %d starts",
				k, recs[i-1].Step, recs[i-1].End.Sub(recs[i].Start), recs[i].Step)
		}
	}
}
