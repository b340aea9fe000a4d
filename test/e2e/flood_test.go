//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// floodQueueBytes and floodFileBytes shrink the shipped queue (128 MiB of
// requests per signal, 256 MiB files) so that the test fills it in
// seconds; everything else is the shipped agent config.
const (
	floodQueueBytes = 8 << 20
	floodFileBytes  = 16 << 20
)

// A pod floods the agent over OTLP during a Kafka outage (issue 19: 13 MB
// requests grew the queue file to 880 MB on the root disk). With the
// shipped config, only the queue shrunk: requests over 4 MiB are refused
// on both protocols before they are decoded; the flood of requests under
// the cap fills the traces queue to its byte cap and no further, its file
// stays under max_size; the agent stays up and its own receivers keep
// producing.
func TestOTLPFloodBoundedAtTheAgent(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	brokerBin := buildBroker(t)

	brokerAddr := freeAddr(t)
	ready := filepath.Join(t.TempDir(), "ready")
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr, "-ready-file", ready,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	eventually(t, 30*time.Second, "broker ready", func() error {
		_, err := os.Stat(ready)
		return err
	}, broker)

	override := filepath.Join(t.TempDir(), "small-queue.yaml")
	if err := os.WriteFile(override, []byte(fmt.Sprintf(`extensions:
  file_storage/queue:
    max_size: %d
    compaction:
      rebound_needed_threshold_mib: 8
      rebound_trigger_threshold_mib: 2
exporters:
  kafka:
    sending_queue:
      queue_size: %d
`, floodFileBytes, floodQueueBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
	node := testbed.NodeInputs{Host: "flood-n0", JobID: "flood-job", PageURL: "http://" + freeAddr(t) + "/metrics",
		SysfsRoot: filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), FRDir: t.TempDir()}
	env, err := node.AgentEnv(brokerAddr, state, addrs, false)
	if err != nil {
		t.Fatal(err)
	}
	agent := startProcess(t, "agent", env, agentBin,
		"--config", filepath.Join(root, "distributions", "agent", "config.yaml"), "--config", override)
	waitHTTP(t, "http://"+addrs.Health+"/", agent)
	telemetry := "http://" + addrs.Telemetry + "/metrics"
	queueDir := filepath.Join(state, "storage", "queue")

	eventually(t, 30*time.Second, "the traces queue's capacity in bytes", func() error {
		if c := telemetrySum(t, telemetry, "otelcol_exporter_queue_capacity", `exporter="kafka"`, `data_type="traces"`); c != floodQueueBytes {
			return fmt.Errorf("capacity %v, want %d", c, floodQueueBytes)
		}
		return nil
	}, agent)

	// Kafka goes away: from now on everything queues on disk.
	broker.stop(t)

	// Oversized requests (13 MB, as in the issue) are refused on both
	// protocols and never reach the pipelines.
	accepted := func() float64 {
		return telemetrySum(t, telemetry, "otelcol_receiver_accepted_spans", `receiver="otlp"`)
	}
	before := accepted()
	huge := floodTraces(t, 13_000, "huge")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post("http://"+addrs.OTLPHTTP+"/v1/traces", "application/x-protobuf", bytes.NewReader(huge))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("HTTP: a %d-byte request was accepted", len(huge))
		}
		t.Logf("HTTP: %d-byte request answered %d", len(huge), resp.StatusCode)
	} else {
		t.Logf("HTTP: %d-byte request cut off: %v", len(huge), err)
	}
	conn, err := grpc.NewClient(addrs.OTLPGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(huge); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, req)
	cancel()
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gRPC: a %d-byte request: %v, want ResourceExhausted", len(huge), err)
	}
	if got := accepted(); got != before {
		t.Errorf("accepted spans went from %v to %v with only oversized requests sent", before, got)
	}

	// The flood: 3 MiB requests, under the cap, until the agent stops
	// taking them or 40 were sent (the batch processor takes them; the
	// full queue refuses, and counts, what it hands on).
	ibBefore := telemetrySum(t, telemetry, "otelcol_receiver_accepted_metric_points", `receiver="ib"`)
	client.Timeout = 5 * time.Second
	sent, ok, stalled := 0, 0, 0
	for sent < 40 && stalled < 3 {
		body := floodTraces(t, 3000, "flood-"+strconv.Itoa(sent%8))
		if len(body) > 4<<20 {
			t.Fatalf("flood request of %d bytes is over the cap", len(body))
		}
		sent++
		resp, err := client.Post("http://"+addrs.OTLPHTTP+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			stalled++
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	t.Logf("flood: %d requests of 3000 spans sent, %d accepted, %d stalled", sent, ok, stalled)

	eventually(t, 60*time.Second, "the traces queue full to its byte cap", func() error {
		if n := telemetrySum(t, telemetry, "otelcol_exporter_queue_size", `exporter="kafka"`, `data_type="traces"`); n < floodQueueBytes/2 {
			return fmt.Errorf("queue holds %v bytes, cap %d", n, floodQueueBytes)
		}
		return nil
	}, agent)
	if n := telemetrySum(t, telemetry, "otelcol_exporter_queue_size", `exporter="kafka"`, `data_type="traces"`); n > floodQueueBytes {
		t.Errorf("traces queue holds %v bytes, over its cap %d", n, floodQueueBytes)
	}
	entries, err := os.ReadDir(queueDir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		total += info.Size()
		t.Logf("queue file %s: %d bytes", e.Name(), info.Size())
		if info.Size() > floodFileBytes {
			t.Errorf("queue file %s: %d bytes, over max_size %d", e.Name(), info.Size(), floodFileBytes)
		}
	}
	if len(entries) == 0 {
		t.Errorf("no queue file in %s", queueDir)
	}

	// The agent is alive and its own receivers still produce.
	eventually(t, 30*time.Second, "the ib receiver keeps producing", func() error {
		if n := telemetrySum(t, telemetry, "otelcol_receiver_accepted_metric_points", `receiver="ib"`); n <= ibBefore {
			return fmt.Errorf("ib accepted %v points, %v before the flood", n, ibBefore)
		}
		return nil
	}, agent)
	if agent.exited() {
		t.Fatal("the agent exited during the flood")
	}
	t.Logf("after the flood: queue files %d bytes in all, agent RSS %s", total, rss(agent.Pid()))
}

// floodTraces is one OTLP request of n spans (1 KiB of attribute each)
// for job, marshalled as protobuf.
func floodTraces(t *testing.T, n int, job string) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("training.job.id", job)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	spans.EnsureCapacity(n)
	pad := strings.Repeat("x", 1024)
	now := pcommon.NewTimestampFromTime(time.Now())
	for i := 0; i < n; i++ {
		sp := spans.AppendEmpty()
		sp.SetName("flood")
		sp.SetTraceID(pcommon.TraceID{1, byte(i >> 8), byte(i)})
		sp.SetSpanID(pcommon.SpanID{2, byte(i >> 16), byte(i >> 8), byte(i)})
		sp.SetStartTimestamp(now)
		sp.SetEndTimestamp(now)
		sp.Attributes().PutStr("pad", pad)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rss is a process's resident set size from /proc, for the log.
func rss(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:"))
		}
	}
	return "unknown"
}
