//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// The detection suite end to end: the testbed's simulated nodes (dcgm-
// exporter pages, sysfs trees, flight-recorder dumps, step spans) read by
// one real agent binary per node, Kafka between them and the real gateway
// binary, and the fault records read back from the gpu_faults topic (and
// found again in VictoriaLogs, the log backend in Loki's place). Jobs
// are 16 ranks (2 nodes) here so that six agents fit on a CI machine: a
// compute straggler, an NVLink degradation and a healthy job.
func TestDetectionThroughTheBinaries(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	brokerBin := buildBroker(t)
	prom := startPrometheus(t)

	cluster := newDetectionCluster(t)

	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	all := []*process{broker, prom.proc}

	logs := startVictoriaLogs(t) // in Loki's place (docs/backends.md)
	all = append(all, logs.proc)
	gwHealth := freeAddr(t)
	gateway := startProcess(t, "gateway", []string{
		"KAFKA_BROKERS=" + brokerAddr,
		"PROMETHEUS_REMOTE_WRITE_URL=" + prom.writeURL(),
		"LOKI_OTLP_ENDPOINT=" + logs.otlpEndpoint(),
		"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
		"STRAGGLER_DECISION_WAIT=1500ms",
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + gwHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(freeAddr(t)),
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
	}, gatewayBin, "--config", filepath.Join(root, "distributions", "gateway", "config.yaml"))
	all = append(all, gateway)
	waitHTTP(t, "http://"+gwHealth+"/", gateway)

	otlpURL := map[string]string{}
	for _, n := range cluster.Nodes() {
		addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
		env, err := n.AgentEnv(brokerAddr, t.TempDir(), addrs, true)
		if err != nil {
			t.Fatal(err)
		}
		agent := startProcess(t, "agent-"+n.Host, env, agentBin, "--config", filepath.Join(root, "distributions", "agent", "config.yaml"))
		health, httpAddr := addrs.Health, addrs.OTLPHTTP
		all = append(all, agent)
		waitHTTP(t, "http://"+health+"/", agent)
		otlpURL[n.Host] = "http://" + httpAddr + "/v1/traces"
	}

	faults := consumeFaults(t, brokerAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cluster.Drive(ctx, func(host string) string { return otlpURL[host] }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Second) // records of the last steps: decision, correlation, Kafka
	records, arrivals := faults.snapshot()
	rep := cluster.Score(records, arrivals)
	var b strings.Builder
	rep.Write(&b)
	t.Logf("fault records on gpu_faults: %d\n%s", len(records), b.String())

	for _, s := range rep.Scenarios {
		if s.HardNegative && len(s.Opened) > 0 {
			t.Errorf("hard negative %s opened %v", s.Name, s.Opened)
		}
		if len(s.FalsePositives) > 0 {
			t.Errorf("%s: false positives %v", s.Name, s.FalsePositives)
		}
		for i, d := range s.Found {
			if d < 0 {
				t.Errorf("%s: expectation %d never opened", s.Name, i)
			}
		}
	}
	if len(rep.Unattributed) > 0 {
		t.Errorf("records naming no simulated node: %v", rep.Unattributed)
	}
	faultsInLogBackend(t, logs, records, all...)
	if t.Failed() {
		for _, p := range all {
			p.dumpLog(t, 30)
		}
	}
}

// newLogSink serves an OTLP/HTTP logs endpoint that accepts everything (a
// stand-in for Loki, whose absence would stall the gateway's fault
// pipeline) and returns its base URL.
func newLogSink(t *testing.T) string {
	addr := freeAddr(t)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.ListenAndServe() }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + addr + "/otlp"
}

// faultConsumer reads the gpu_faults topic (OTLP protobuf logs) from the
// beginning, as a downstream consumer of fault records would.
type faultConsumer struct {
	mu       sync.Mutex
	records  []fault.Record
	arrivals []time.Time
}

func consumeFaults(t *testing.T, broker string) *faultConsumer {
	fc := &faultConsumer{}
	consumeFaultRecords(t, broker, func(_ *kgo.Record, records []fault.Record, arrived time.Time) {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		for _, r := range records {
			fc.records = append(fc.records, r)
			fc.arrivals = append(fc.arrivals, arrived)
		}
	})
	return fc
}

// consumeFaultRecords reads gpu_faults from the start in the background
// until the test ends and hands fn each message's fault records with the
// message and the time it arrived; a message that is not fault records
// fails the test.
func consumeFaultRecords(t *testing.T, broker string, fn func(msg *kgo.Record, records []fault.Record, arrived time.Time)) {
	var un plog.ProtoUnmarshaler
	consumeTopic(t, broker, "gpu_faults", func(msg *kgo.Record) {
		arrived := time.Now()
		ld, err := un.UnmarshalLogs(msg.Value)
		if err != nil {
			t.Errorf("gpu_faults: a message that is not OTLP logs: %v", err)
			return
		}
		records, errs := fault.FromLogs(ld)
		for _, err := range errs {
			t.Errorf("gpu_faults: %v", err)
		}
		fn(msg, records, arrived)
	})
}

func (fc *faultConsumer) snapshot() ([]fault.Record, []time.Time) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]fault.Record(nil), fc.records...), append([]time.Time(nil), fc.arrivals...)
}

// newDetectionCluster is the detection tests' simulated cluster: 16-rank
// jobs with a compute straggler, an NVLink degradation and a healthy
// control; closed when the test ends.
func newDetectionCluster(t *testing.T) *testbed.Cluster {
	t.Helper()
	opts := testbed.DefaultOptions()
	opts.Ranks = 16
	opts.Scenarios = []string{"compute_straggler", "nvlink_degradation", "healthy"}
	opts.Logger = zaptest.NewLogger(t)
	cluster, err := testbed.NewCluster(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	t.Logf("seed %d", cluster.Seed())
	return cluster
}
