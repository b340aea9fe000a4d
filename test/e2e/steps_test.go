//go:build e2e

package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Eight training processes use the Python step SDK against the real agent
// binary (OTLP/HTTP in, the stepspan processor, the file exporter out instead
// of Kafka). Every
// rank span that comes out carries exactly the contract's ids, computed here
// from the documented bytes, and the 8 ranks of a step share one trace.
func TestPythonStepsThroughTheAgent(t *testing.T) {
	root := repoRoot(t)
	collector := binary(t, "otelcol-gpu-agent")
	python := lookPath(t, "python3")

	httpAddr := freeAddr(t)
	out := filepath.Join(t.TempDir(), "spans.jsonl")
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  stepspan:
    collective_wait: 200ms
    orphan_after: 1s
exporters:
  file:
    path: %s
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [stepspan]
      exporters: [file]
`, httpAddr, out)
	col := startWithConfig(t, "agent", collector, cfg)
	eventually(t, 60*time.Second, "collector listening", func() error {
		c, err := netDial(httpAddr)
		if err == nil {
			c.Close()
		}
		return err
	}, col)

	// The training script: 3 steps, four phases, tokens and loss; its own
	// span ids would be random, the SDK computes the contract's.
	script := `
import os, sys, time
sys.path.insert(0, os.environ["SDK_DIR"])
import otelcol_gpu_step
steps = otelcol_gpu_step.Steps(endpoint=os.environ["ENDPOINT"], flush_interval=0.05)
for n in (100, 101, 102):
    with steps.step(n):
        for phase in ("dataload", "forward", "backward", "optimizer"):
            with steps.phase(phase):
                time.sleep(0.002)
        steps.record(tokens=4096, loss=2.5)
steps.close(5)
print("sent", steps.sent, "dropped", steps.dropped)
`
	const job, attempt, ranks = "llama-70b", 2, 8
	var procs []*process
	for rank := 0; rank < ranks; rank++ {
		env := []string{
			"SDK_DIR=" + filepath.Join(root, "sdk", "python"),
			"ENDPOINT=http://" + httpAddr,
			"TORCHELASTIC_RUN_ID=" + job,
			"TORCHELASTIC_RESTART_COUNT=" + strconv.Itoa(attempt),
			"RANK=" + strconv.Itoa(rank),
			"LOCAL_RANK=" + strconv.Itoa(rank),
			"WORLD_SIZE=" + strconv.Itoa(ranks),
		}
		procs = append(procs, startProcess(t, "rank"+strconv.Itoa(rank), env, python, "-c", script))
	}
	for _, p := range procs {
		if err := p.Err(); err != nil { // Err waits for the rank to end
			p.dumpLog(t, 20)
			t.Fatalf("%s: %v", p.Name(), err)
		}
	}

	h := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	var spans []ptrace.Span
	var rankOf []int64
	eventually(t, 30*time.Second, "24 rank step spans in the file", func() error {
		spans, rankOf = nil, nil
		f, err := os.Open(out)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
			if err != nil {
				return fmt.Errorf("file exporter line is not OTLP JSON: %w", err)
			}
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				rs := td.ResourceSpans().At(i)
				rank, _ := rs.Resource().Attributes().Get("training.rank")
				for j := 0; j < rs.ScopeSpans().Len(); j++ {
					ss := rs.ScopeSpans().At(j).Spans()
					for k := 0; k < ss.Len(); k++ {
						if ss.At(k).Name() == "train.step" {
							spans = append(spans, ss.At(k))
							rankOf = append(rankOf, rank.Int())
						}
					}
				}
			}
		}
		if len(spans) != 3*ranks {
			return fmt.Errorf("%d step spans so far", len(spans))
		}
		return nil
	}, col)

	traces := map[string]map[int64]bool{}
	for i, s := range spans {
		stepV, _ := s.Attributes().Get("iteration.step")
		base := job + "\x00" + strconv.Itoa(attempt) + "\x00" + strconv.FormatInt(stepV.Int(), 10)
		if got, want := s.TraceID().String(), h(base)[:32]; got != want {
			t.Errorf("rank %d step %d: trace id %s, want %s", rankOf[i], stepV.Int(), got, want)
		}
		if got, want := s.SpanID().String(), h(base + "\x00" + strconv.FormatInt(rankOf[i], 10))[:16]; got != want {
			t.Errorf("rank %d step %d: span id %s, want %s", rankOf[i], stepV.Int(), got, want)
		}
		if got, want := s.ParentSpanID().String(), h(base + "\x00root")[:16]; got != want {
			t.Errorf("rank %d step %d: parent %s, want %s", rankOf[i], stepV.Int(), got, want)
		}
		for _, phase := range []string{"dataload", "forward", "backward", "optimizer"} {
			if v, ok := s.Attributes().Get("training.phase." + phase + "_ns"); !ok || v.Int() <= 0 {
				t.Errorf("rank %d: training.phase.%s_ns = %v", rankOf[i], phase, v.AsRaw())
			}
		}
		if _, ok := s.Attributes().Get("nccl.collectives.count"); !ok {
			t.Errorf("rank %d: the processor's collective summary is missing", rankOf[i])
		}
		tid := s.TraceID().String()
		if traces[tid] == nil {
			traces[tid] = map[int64]bool{}
		}
		traces[tid][rankOf[i]] = true
	}
	if len(traces) != 3 {
		t.Errorf("%d traces, want one per step (3)", len(traces))
	}
	for tid, rs := range traces {
		if len(rs) != ranks || strings.TrimSpace(tid) == "" {
			t.Errorf("trace %s holds ranks %v, want all %d", tid, rs, ranks)
		}
	}
}
