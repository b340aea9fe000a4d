//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// The gateway on its shipped config with real backends in every place:
// Prometheus (remote write), Jaeger v2 where Tempo goes and VictoriaLogs
// where Loki goes, pointed at through the environment the config reads
// (TEMPO_OTLP_ENDPOINT, LOKI_OTLP_ENDPOINT), nothing edited. One simulated
// 8-GPU node runs the testbed's compute_straggler scenario through its real
// agent and Kafka. The fault record read from gpu_faults is the reference:
// the step trace its evidence cites is fetched from Jaeger by the id the
// step contract defines (job, attempt and step; internal/steprecord) and
// must hold every rank's span, the slow rank's the slowest, the
// straggler's verdict on it and the step's root naming it; the record is
// fetched from VictoriaLogs by its fault.id and must say what gpu_faults
// said.
func TestTraceAndLogBackends(t *testing.T) {
	r := newFailureRig(t)
	prom := startPrometheus(t)
	jg := startJaeger(t)
	vl := startVictoriaLogs(t)
	gw := r.startGateway(t, "gateway",
		"PROMETHEUS_REMOTE_WRITE_URL="+prom.writeURL(),
		"TEMPO_OTLP_ENDPOINT="+jg.otlpGRPC,
		"LOKI_OTLP_ENDPOINT="+vl.otlpEndpoint(),
	)
	all := append(append([]*process(nil), r.procs...), gw, prom.proc, jg.proc, vl.proc)
	defer func() {
		if t.Failed() {
			for _, p := range all {
				p.dumpLog(t, 30)
			}
		}
	}()
	host, gpu, rank := stragglerPlace(t, r)
	driven := r.drive(t)

	// The reference record: the straggler's open record on gpu_faults,
	// where the scenario put the straggler.
	var rec fault.Record
	eventually(t, 3*time.Minute, "a straggler.compute record on gpu_faults", func() error {
		recs, _ := r.stragglerFaults()
		for _, x := range recs {
			if x.State == fault.StateOpen {
				rec = x
				return nil
			}
		}
		return fmt.Errorf("none open yet (%d straggler.compute records)", len(recs))
	}, all...)
	if rec.HostName != host || rec.GPUUUID != gpu || !rec.RankKnown || rec.Rank != rank {
		t.Fatalf("gpu_faults: straggler.compute on host %q GPU %q rank %d (known %v), want host %q GPU %q rank %d (the scenario's)",
			rec.HostName, rec.GPUUUID, rec.Rank, rec.RankKnown, host, gpu, rank)
	}
	verdict, ok := spanEvidence(rec, semconv.AttrStragglerVerdict)
	if !ok {
		t.Fatalf("gpu_faults: fault %s has no %s evidence from a span: %+v", rec.ID, semconv.AttrStragglerVerdict, rec.Evidence)
	}

	// The step the evidence cites, by the contract: its trace id is
	// steprecord.TraceID(job, attempt, step), attempt 0 (the testbed's jobs
	// never restart).
	step := int64(-1)
	for s := int64(0); s < 10000; s++ {
		if steprecord.TraceID(rec.JobID, 0, s) == verdict.TraceID {
			step = s
			break
		}
	}
	if step < 0 {
		t.Fatalf("the verdict's trace %s is not the contract's trace id of any step 0..9999 of job %q", verdict.TraceID, rec.JobID)
	}
	traceID := steprecord.TraceID(rec.JobID, 0, step)

	// Jaeger: the whole step, as tail sampling kept it (the straggler's
	// steps are kept whole: docs/architecture.md).
	var st stepTrace
	eventually(t, 2*time.Minute, fmt.Sprintf("step %d's trace %s in Jaeger", step, traceID), func() error {
		td, err := jg.trace(traceID)
		if err != nil {
			return err
		}
		if td == nil {
			return errors.New("not found")
		}
		st = readStepTrace(*td)
		if len(st.ranks) < len(r.node.GPUUUIDs) || st.root == nil || len(st.verdicts) == 0 {
			return fmt.Errorf("%d rank spans, root %v, %d verdict spans so far", len(st.ranks), st.root != nil, len(st.verdicts))
		}
		return nil
	}, all...)
	slow, ok := st.ranks[rank]
	if !ok {
		t.Fatalf("Jaeger: step %d has no train.step span of rank %d (ranks %v)", step, rank, sortedKeys(st.ranks))
	}
	for peer, s := range st.ranks {
		if peer != rank && computeNs(s) >= computeNs(slow) {
			t.Errorf("Jaeger: step %d: rank %d computed %v, not less than the slow rank %d's %v",
				step, peer, time.Duration(computeNs(s)), rank, time.Duration(computeNs(slow)))
		}
	}
	if v, ok := st.verdicts[rank]; !ok {
		t.Errorf("Jaeger: step %d has no %s span for rank %d (verdicts for %v)", step, semconv.SpanTrainStepVerdict, rank, sortedKeys(st.verdicts))
	} else {
		if got := attrStr(v, semconv.AttrStragglerVerdict); got != string(fault.Type("straggler.compute")) {
			t.Errorf("Jaeger: rank %d's verdict %s = %q, want straggler.compute", rank, semconv.AttrStragglerVerdict, got)
		}
		if v.SpanID() != verdict.SpanID {
			t.Errorf("Jaeger: rank %d's verdict span is %s, the fault's evidence cites %s", rank, v.SpanID(), verdict.SpanID)
		}
		if got := attrStr(v, semconv.AttrHostName); got != host {
			t.Errorf("Jaeger: rank %d's verdict names host %q, want %q", rank, got, host)
		}
	}
	// The root's statistics (step.slow is another matter: the whole step
	// against the job's recent mean, which the straggler's earlier steps
	// have already raised).
	if got, ok := st.root.Attributes().Get(semconv.AttrStragglerFlaggedRanks); !ok || got.Int() < 1 {
		t.Errorf("Jaeger: step %d's root span has %s = %v, want at least 1", step, semconv.AttrStragglerFlaggedRanks, got.AsRaw())
	}
	if got, ok := st.root.Attributes().Get(semconv.AttrStepSlowestRank); !ok || got.Int() != rank {
		t.Errorf("Jaeger: step %d's root span has %s = %v, want %d", step, semconv.AttrStepSlowestRank, got.AsRaw(), rank)
	}
	if st.root.SpanID() != steprecord.RootSpanID(rec.JobID, 0, step) || slow.ParentSpanID() != st.root.SpanID() {
		t.Errorf("Jaeger: step %d: root span %s and rank %d's parent %s, want both the contract's root id %s",
			step, st.root.SpanID(), rank, slow.ParentSpanID(), steprecord.RootSpanID(rec.JobID, 0, step))
	}

	// VictoriaLogs: every record of the fault by its fault.id, the open one
	// compared with gpu_faults' field by field.
	q := fmt.Sprintf(`%q:=%q`, fault.AttrID, rec.ID)
	var row map[string]string
	eventually(t, time.Minute, "fault "+rec.ID+" in VictoriaLogs", func() error {
		rows, err := vl.query(q)
		if err != nil {
			return err
		}
		for _, x := range rows {
			if x[fault.AttrState] == string(fault.StateOpen) {
				row = x
				return nil
			}
		}
		return fmt.Errorf("%d rows, none open", len(rows))
	}, all...)
	want := map[string]string{
		fault.AttrType:          string(rec.Type),
		fault.AttrSeverity:      string(rec.Severity),
		fault.AttrRule:          rec.Rule,
		fault.AttrEntity:        rec.Entity.String(),
		fault.AttrFirstSeen:     rec.FirstSeen.UTC().Format(time.RFC3339Nano),
		fault.AttrHostName:      rec.HostName,
		fault.AttrGPUUUID:       rec.GPUUUID,
		fault.AttrTrainingJobID: rec.JobID,
		fault.AttrTrainingRank:  strconv.FormatInt(rec.Rank, 10),
		// The log record's own fields, under VictoriaLogs' names.
		"_msg":          rec.Summary,
		"event_name":    fault.EventName,
		"severity_text": string(rec.Severity),
		"trace_id":      traceID.String(),
	}
	for k, v := range want {
		if row[k] != v {
			t.Errorf("VictoriaLogs: fault %s: %s = %q, gpu_faults says %q", rec.ID, k, row[k], v)
		}
	}
	var evidence []map[string]any
	if err := json.Unmarshal([]byte(row[fault.AttrEvidence]), &evidence); err != nil {
		t.Fatalf("VictoriaLogs: fault %s: %s is not the JSON array of the evidence maps: %v: %q", rec.ID, fault.AttrEvidence, err, row[fault.AttrEvidence])
	}
	if len(evidence) != len(rec.Evidence) {
		t.Fatalf("VictoriaLogs: fault %s has %d evidence entries, gpu_faults %d: %v", rec.ID, len(evidence), len(rec.Evidence), evidence)
	}
	for i, ev := range rec.Evidence {
		got := evidence[i]
		wantEv := map[string]string{fault.EvidenceSignal: ev.Signal, fault.EvidenceText: ev.Text}
		if !ev.TraceID.IsEmpty() {
			wantEv[fault.EvidenceTraceID] = ev.TraceID.String()
			wantEv[fault.EvidenceSpanID] = ev.SpanID.String()
		}
		for k, v := range wantEv {
			if s, _ := got[k].(string); s != v {
				t.Errorf("VictoriaLogs: fault %s evidence %d: %s = %v, gpu_faults says %q", rec.ID, i, k, got[k], v)
			}
		}
	}

	// Prometheus, beside them, has the job's step metrics.
	eventually(t, time.Minute, "the job's step metrics in Prometheus", func() error {
		n, _, err := prom.scalar(fmt.Sprintf(`sum(training_step_duration_seconds_count{training_job_id=%q})`, rec.JobID))
		if err != nil {
			return err
		}
		if n <= 0 {
			return fmt.Errorf("%v steps counted", n)
		}
		return nil
	}, all...)

	if err := driven(); err != nil {
		t.Fatalf("driving the job: %v", err)
	}
	t.Logf("fault %s (%s, host %s rank %d): job %q step %d's trace %s in Jaeger with %d rank spans; record in VictoriaLogs by %s",
		rec.ID, rec.Type, host, rank, rec.JobID, step, traceID, len(st.ranks), q)
}

// stragglerPlace is where the testbed's compute_straggler scenario slows a
// rank on the rig's one node: its host, the GPU's UUID and the rank.
func stragglerPlace(t *testing.T, r *failureRig) (host, gpuUUID string, rank int64) {
	scs, err := testbed.Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		if sc.Name != "compute_straggler" || sc.Inject == nil {
			continue
		}
		nodes := len(r.cluster.Nodes())
		gpus := len(r.node.GPUUUIDs)
		// The testbed folds the scenario's node index onto the nodes the
		// rig has (testbed.NewCluster), and numbers ranks node by node.
		n := sc.Inject.Node % nodes
		if n != r.node.Index || sc.Inject.GPU >= gpus {
			t.Fatalf("compute_straggler injects on node %d GPU %d, outside the rig's node %d with %d GPUs", n, sc.Inject.GPU, r.node.Index, gpus)
		}
		return r.node.Host, r.node.GPUUUIDs[sc.Inject.GPU], int64(n*gpus + sc.Inject.GPU)
	}
	t.Fatal("testbed: no compute_straggler scenario with an injection")
	return "", "", 0
}

// spanEvidence is the record's first evidence of this signal that came from
// a span.
func spanEvidence(rec fault.Record, signal string) (fault.Evidence, bool) {
	for _, ev := range rec.Evidence {
		if ev.Signal == signal && !ev.TraceID.IsEmpty() {
			return ev, true
		}
	}
	return fault.Evidence{}, false
}

// stepTrace is one step's trace as a backend returned it.
type stepTrace struct {
	ranks    map[int64]ptrace.Span // train.step by training.rank
	verdicts map[int64]ptrace.Span // train.step.verdict by training.rank
	root     *ptrace.Span          // train.step.root
}

func readStepTrace(td ptrace.Traces) stepTrace {
	st := stepTrace{ranks: map[int64]ptrace.Span{}, verdicts: map[int64]ptrace.Span{}}
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s := spans.At(k)
				switch s.Name() {
				case semconv.SpanTrainStep:
					st.ranks[spanRank(s, rs.Resource().Attributes())] = s
				case semconv.SpanTrainStepVerdict:
					st.verdicts[spanRank(s, rs.Resource().Attributes())] = s
				case semconv.SpanTrainStepRoot:
					root := s
					st.root = &root
				}
			}
		}
	}
	return st
}

// spanRank is training.rank from the span, else from its resource (the
// agent's stepspan processor may keep it on either).
func spanRank(s ptrace.Span, res pcommon.Map) int64 {
	if v, ok := s.Attributes().Get(semconv.AttrTrainingRank); ok {
		return v.Int()
	}
	if v, ok := res.Get(semconv.AttrTrainingRank); ok {
		return v.Int()
	}
	return -1
}

// computeNs is a rank span's forward and backward time, what the
// compute_straggler scenario multiplies.
func computeNs(s ptrace.Span) int64 {
	var n int64
	for _, phase := range []string{"forward", "backward"} {
		if v, ok := s.Attributes().Get(steprecord.PhaseKey(phase)); ok {
			n += v.Int()
		}
	}
	return n
}

func attrStr(s ptrace.Span, key string) string {
	v, _ := s.Attributes().Get(key)
	return v.AsString()
}

func sortedKeys(m map[int64]ptrace.Span) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
