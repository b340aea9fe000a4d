//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// The gateway's tail sampling, through the real binary: rank step spans go
// into otlp_spans as agents would write them, and an OTLP gRPC server
// stands in for Tempo. Every trace a diagnosis needs must arrive whole (the
// steps of a straggler, with their verdict and root spans; a failed step; a
// step whose spans carry NVLink errors), and about 10 % of healthy steps.
func TestGatewayTailSampling(t *testing.T) {
	gw := startSpansGateway(t, 3)
	broker, gateway, tempo, brokerAddr := gw.broker, gw.gateway, gw.tempo, gw.brokerAddr

	const (
		ranks        = 8
		stragglerJob = "ts-straggler"
		healthyJob   = "ts-healthy"
		steps        = 30
		healthySteps = 400
		slowRank     = 5
		slowFrom     = 10
	)
	base := time.Now().Add(-time.Hour)
	var batches []ptrace.Traces
	for s := int64(0); s < steps; s++ {
		td := ptrace.NewTraces()
		for r := int64(0); r < ranks; r++ {
			factor := 1.0
			if r == slowRank && s >= slowFrom {
				factor = 2.5
			}
			stepSpan(td, stragglerJob, s, r, ranks, base.Add(time.Duration(s)*2*time.Second), factor)
		}
		batches = append(batches, td)
	}
	for s := int64(0); s < healthySteps; s++ {
		td := ptrace.NewTraces()
		for r := int64(0); r < ranks; r++ {
			stepSpan(td, healthyJob, s, r, ranks, base.Add(time.Duration(s)*2*time.Second), 1)
		}
		batches = append(batches, td)
	}
	// A failed step and a step whose rank spans report NVLink CRC growth.
	failed := ptrace.NewTraces()
	stepSpan(failed, "ts-failed", 0, 0, 1, base, 1).Status().SetCode(ptrace.StatusCodeError)
	nvlink := ptrace.NewTraces()
	stepSpan(nvlink, "ts-nvlink", 0, 0, 1, base, 1).Attributes().PutInt("gpu.health.nvlink_crc_errors", 40)
	batches = append(batches, failed, nvlink)
	produceTraces(t, brokerAddr, batches)

	// Every special trace arrived, and the healthy steps had time for theirs.
	eventually(t, 2*time.Minute, "special traces at Tempo", func() error {
		for _, id := range []pcommon.TraceID{steprecord.TraceID("ts-failed", 0, 0), steprecord.TraceID("ts-nvlink", 0, 0)} {
			if tempo.spans(id) == 0 {
				return fmt.Errorf("trace %s not at Tempo", id)
			}
		}
		if n := len(tempo.withSpan("train.step.verdict")); n < steps-slowFrom-4 {
			return fmt.Errorf("%d traces with a verdict at Tempo", n)
		}
		return nil
	}, gateway, broker)
	time.Sleep(8 * time.Second) // past decision_wait for the last healthy steps

	// The straggler's traces: each whole (every rank span, the root and the verdict).
	verdictTraces := tempo.withSpan("train.step.verdict")
	for _, id := range verdictTraces {
		if n := tempo.spansNamed(id, "train.step"); n != ranks {
			t.Errorf("verdict trace %s holds %d of %d rank spans", id, n, ranks)
		}
		if tempo.spansNamed(id, "train.step.root") != 1 {
			t.Errorf("verdict trace %s has no root span", id)
		}
	}
	for s := int64(slowFrom + 2); s < steps; s++ {
		if tempo.spans(steprecord.TraceID(stragglerJob, 0, s)) == 0 {
			t.Errorf("step %d of the straggler job (rank %d slow since step %d) was sampled out", s, slowRank, slowFrom)
		}
	}
	// Healthy steps: about 10 %, each whole.
	kept := 0
	for s := int64(0); s < healthySteps; s++ {
		id := steprecord.TraceID(healthyJob, 0, s)
		if n := tempo.spans(id); n > 0 {
			kept++
			if got := tempo.spansNamed(id, "train.step"); got != ranks {
				t.Errorf("healthy step %d kept with %d of %d rank spans", s, got, ranks)
			}
		}
	}
	// 400 steps at 10 %: mean 40, standard deviation 6; bounds at 4 sigma.
	if kept < 16 || kept > 64 {
		t.Errorf("%d of %d healthy steps kept, want about 10 %%", kept, healthySteps)
	}
	t.Logf("kept %d of %d healthy steps, %d straggler steps with verdicts", kept, healthySteps, len(verdictTraces))
	if t.Failed() {
		gateway.dumpLog(t, 40)
	}
}

// spansGateway is a broker, the gateway binary on its shipped config and an
// OTLP trace server in Tempo's place: what the span-path tests share.
type spansGateway struct {
	broker, gateway *process
	tempo           *traceSink
	brokerAddr      string
	telemetry       string // the gateway's own metrics endpoint (host:port)
}

// startSpansGateway starts them with the topics' partition count and extra
// gateway environment (NAME=value).
func startSpansGateway(t *testing.T, partitions int, env ...string) spansGateway {
	root := repoRoot(t)
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	brokerBin := buildBroker(t)
	g := spansGateway{brokerAddr: freeAddr(t), tempo: startTraceSink(t), telemetry: freeAddr(t)}
	g.broker = startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", g.brokerAddr, "-advertise", g.brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", strconv.Itoa(partitions))
	sink := newLogSink(t) // accepts Loki's and Prometheus' requests alike
	health := freeAddr(t)
	g.gateway = startProcess(t, "gateway", append([]string{
		"KAFKA_BROKERS=" + g.brokerAddr,
		"PROMETHEUS_REMOTE_WRITE_URL=" + sink + "/api/v1/write",
		"LOKI_OTLP_ENDPOINT=" + sink,
		"TEMPO_OTLP_ENDPOINT=" + g.tempo.addr,
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(g.telemetry),
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
	}, env...), gatewayBin, "--config", filepath.Join(root, "distributions", "gateway", "config.yaml"))
	waitHTTP(t, "http://"+health+"/", g.gateway)
	return g
}

// stepSpan appends one rank's train.step span as the agent's stepspan
// processor writes it (docs/training-scripts.md): the contract's ids and
// the phase times, compute scaled by factor.
func stepSpan(td ptrace.Traces, job string, step, rank, worldSize int64, start time.Time, factor float64) ptrace.Span {
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	res.PutStr("service.name", "train")
	res.PutStr("training.job.id", job)
	res.PutStr("host.name", fmt.Sprintf("node-%d", rank/8))
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("train.step")
	span.SetTraceID(steprecord.TraceID(job, 0, step))
	span.SetParentSpanID(steprecord.RootSpanID(job, 0, step))
	span.SetSpanID(steprecord.RankSpanID(job, 0, step, rank))
	forward := time.Duration(float64(300*time.Millisecond) * factor)
	backward := time.Duration(float64(600*time.Millisecond) * factor)
	optimizer := 50 * time.Millisecond
	collectives := 200 * time.Millisecond
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(forward + backward + optimizer + collectives)))
	a := span.Attributes()
	a.PutStr("training.job.id", job)
	a.PutInt("training.attempt", 0)
	a.PutInt("iteration.step", step)
	a.PutInt("training.rank", rank)
	a.PutInt("training.world_size", worldSize)
	a.PutInt("training.phase.forward_ns", forward.Nanoseconds())
	a.PutInt("training.phase.backward_ns", backward.Nanoseconds())
	a.PutInt("training.phase.optimizer_ns", optimizer.Nanoseconds())
	a.PutInt("nccl.collectives.total_ns", collectives.Nanoseconds())
	return span
}

// produceTraces writes each batch to otlp_spans keyed by its job, as the
// agent's kafka exporter does.
func produceTraces(t *testing.T, broker string, batches []ptrace.Traces) {
	client, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("otlp_spans"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var m ptrace.ProtoMarshaler
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, td := range batches {
		b, err := m.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		job, _ := td.ResourceSpans().At(0).Resource().Attributes().Get("training.job.id")
		if err := client.ProduceSync(ctx, &kgo.Record{Key: []byte(job.Str()), Value: b}).FirstErr(); err != nil {
			t.Fatalf("producing to otlp_spans: %v", err)
		}
	}
}

// traceSink is an OTLP gRPC trace server (Tempo's role) that remembers
// the name of every span it received, by trace.
type traceSink struct {
	ptraceotlp.UnimplementedGRPCServer
	addr string
	mu   sync.Mutex
	got  map[pcommon.TraceID][]string
}

func startTraceSink(t *testing.T) *traceSink {
	return startTraceSinkAt(t, "127.0.0.1:0")
}

// startTraceSinkAt listens on addr: a Tempo that comes back where the
// gateway expects it.
func startTraceSinkAt(t *testing.T, addr string) *traceSink {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &traceSink{addr: ln.Addr().String(), got: map[pcommon.TraceID][]string{}}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, s)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return s
}

func (s *traceSink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				s.got[sp.TraceID()] = append(s.got[sp.TraceID()], sp.Name())
			}
		}
	}
	return ptraceotlp.NewExportResponse(), nil
}

// total is how many spans arrived.
func (s *traceSink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, names := range s.got {
		n += len(names)
	}
	return n
}

func (s *traceSink) spans(id pcommon.TraceID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got[id])
}

func (s *traceSink) spansNamed(id pcommon.TraceID, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, got := range s.got[id] {
		if got == name {
			n++
		}
	}
	return n
}

// withSpan lists the traces holding a span of this name.
func (s *traceSink) withSpan(name string) []pcommon.TraceID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []pcommon.TraceID
	for id, names := range s.got {
		for _, n := range names {
			if n == name {
				ids = append(ids, id)
				break
			}
		}
	}
	return ids
}
