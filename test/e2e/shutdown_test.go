//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

// markerXmitWords is the mlx5_0 transmit counter the fixture shows only
// while Kafka is down: a point with its value in Kafka can only come from
// what the agent queued during the outage.
const markerXmitWords = fixtureXmitWords + 777_777

// A Kafka outage must not hold SIGTERM (issue 19): with the shipped agent
// config, the agent's data queued while the broker is gone, SIGTERM ends the
// process (no kubelet SIGKILL needed), and the queue survives on disk: the
// next agent, with the broker back, sends what the first one scraped during
// the outage.
func TestSIGTERMDuringKafkaOutageExitsAndKeepsTheQueue(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	brokerBin := buildBroker(t)

	brokerAddr := freeAddr(t)
	broker := startShutdownBroker(t, brokerBin, brokerAddr)

	sysfs := filepath.Join(t.TempDir(), "sys")
	copyTree(t, filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), sysfs)
	xmitFile := filepath.Join(sysfs, "class", "infiniband", "mlx5_0", "ports", "1", "counters", "port_xmit_data")

	// Both lives of the agent share the storage directory, as a restarted
	// pod keeps its hostPath volume.
	storage := t.TempDir()
	startAgent := func() (*process, string) {
		health, telemetry := freeAddr(t), freeAddr(t)
		a := startProcess(t, "agent", []string{
			"KAFKA_BROKERS=" + brokerAddr,
			"SYSFS_ROOT=" + sysfs,
			// Not 1 s: the ib receiver's read_timeout (5 s) must fit in it.
			"IB_COLLECTION_INTERVAL=5s",
			"OTELCOL_GPU_STORAGE_DIR=" + storage,
			"OTLP_GRPC_ENDPOINT=" + freeAddr(t),
			"OTLP_HTTP_ENDPOINT=" + freeAddr(t),
			"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
			"OTELCOL_GPU_TELEMETRY_PORT=" + port(telemetry),
			"NCCL_FR_DIR=" + t.TempDir(),
			"NCCL_INSPECTOR_DIR=" + t.TempDir(),
		}, agentBin, "--config", filepath.Join(root, "distributions", "agent", "config.yaml"))
		waitHTTP(t, "http://"+health+"/", a)
		return a, "http://" + telemetry + "/metrics"
	}
	agent, telemetry := startAgent()

	// The producer is connected and sending before the outage, so that a
	// send is under way when the broker goes.
	fixtureBytes := int64(fixtureXmitWords * 4)
	eventually(t, 90*time.Second, "the fixture's counter in otlp_metrics", func() error {
		return xmitValueInKafka(t, brokerAddr, fixtureBytes)
	}, agent, broker)

	broker.stop(t)
	writeFileAtomic(t, xmitFile, strconv.FormatUint(markerXmitWords, 10)+"\n")
	queued := func() float64 {
		return telemetrySum(t, telemetry, "otelcol_exporter_queue_size", `exporter="kafka"`, `data_type="metrics"`)
	}
	scraped := func() float64 {
		return telemetrySum(t, telemetry, "otelcol_receiver_accepted_metric_points", `receiver="ib"`)
	}
	// Three ib scrapes after the marker was written: the second read it
	// whole, and its batch (1 s) reached the queue before the third. The
	// queue's sizer may count requests or bytes: only its growth is checked.
	start := queued()
	last, scrapes := scraped(), 0
	eventually(t, 90*time.Second, "three ib scrapes during the outage", func() error {
		if s := scraped(); s > last {
			last, scrapes = s, scrapes+1
		}
		if scrapes < 3 {
			return fmt.Errorf("%d ib scrapes since the marker was written, want 3", scrapes)
		}
		return nil
	}, agent)
	if q := queued(); q <= start {
		t.Fatalf("kafka metrics queue at %v, was %v when Kafka went: nothing queued", q, start)
	}

	if err := agent.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// It used to wait until SIGKILL; the bound is the (29).
	took := waitExit(t, agent, 3*time.Minute)
	t.Logf("agent exited %s after SIGTERM (Kafka down)", took.Round(100*time.Millisecond))
	if took > shutdownBound {
		t.Errorf("the agent took %s to exit on SIGTERM, want under %s", took, shutdownBound)
	}
	if code := agent.ExitCode(); code != 0 {
		t.Errorf("agent exited with status %d after SIGTERM, want 0", code)
	}

	// From now on the fixture shows another value: the marker can reach
	// Kafka only from the queue on disk.
	writeFileAtomic(t, xmitFile, strconv.FormatUint(fixtureXmitWords, 10)+"\n")
	broker = startShutdownBroker(t, brokerBin, brokerAddr)
	agent, _ = startAgent()
	eventually(t, 2*time.Minute, "the counter queued during the outage in otlp_metrics", func() error {
		return xmitValueInKafka(t, brokerAddr, markerXmitWords*4)
	}, agent, broker)
}

// xmitValueInKafka reads otlp_metrics from the start and returns nil once a
// mlx5_0 transmit-bytes point has value want.
func xmitValueInKafka(t *testing.T, broker string, want int64) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("otlp_metrics"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var un pmetric.ProtoUnmarshaler
	var seen []int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fetches := client.PollFetches(ctx)
		cancel()
		if fetches.NumRecords() == 0 {
			return fmt.Errorf("no mlx5_0 transmit point of %d bytes in otlp_metrics (values seen: %v)", want, seen)
		}
		found := false
		fetches.EachRecord(func(rec *kgo.Record) {
			md, err := un.UnmarshalMetrics(rec.Value)
			if err != nil {
				t.Errorf("otlp_metrics: %v", err)
				return
			}
			for _, v := range xmitValues(md) {
				if v == want {
					found = true
				}
				if len(seen) < 10 {
					seen = append(seen, v)
				}
			}
		})
		if found {
			return nil
		}
	}
}

// xmitValues returns the values of md's mlx5_0 transmit-bytes points.
func xmitValues(md pmetric.Metrics) []int64 {
	var out []int64
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if dev, _ := rm.Resource().Attributes().Get("ib.device"); dev.Str() != "mlx5_0" {
			continue
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() != "hw.network.io" || m.Type() != pmetric.MetricTypeSum {
					continue
				}
				dps := m.Sum().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					if dir, _ := dps.At(d).Attributes().Get("network.io.direction"); dir.Str() == "transmit" {
						out = append(out, dps.At(d).IntValue())
					}
				}
			}
		}
	}
	return out
}

// queueFullBytes shrinks the agent's Kafka queues (128 MiB of requests per
// signal) so that the test fills one in seconds; everything else is the
// shipped config.
const queueFullBytes = 4 << 20

// SIGTERM with Kafka down and the agent's queue full (issue 29): training
// scripts keep sending metrics over OTLP into the full metrics queue, with
// no client timeout, and the logs and traces queues hold data too (each of
// the three exporters has a send in flight), when the agent is told to
// stop. No OTLP request is held by the full queue (they used to wait in
// the batch processor, and SIGTERM with them, past the chart's 60 s grace
// period); the agent exits within 30 s; what the full queue refused is
// counted; and what the queues had accepted stays on disk: the next agent
// sends it once the broker is back.
func TestSIGTERMWithTheAgentQueueFull(t *testing.T) {
	root := repoRoot(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	brokerBin := buildBroker(t)
	brokerAddr := freeAddr(t)
	broker := startShutdownBroker(t, brokerBin, brokerAddr)

	override := filepath.Join(t.TempDir(), "small-queue.yaml")
	if err := os.WriteFile(override, []byte(fmt.Sprintf("exporters:\n  kafka:\n    sending_queue:\n      queue_size: %d\n", queueFullBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Both lives share the state directory, as a restarted pod keeps its
	// volume.
	state := t.TempDir()
	node := testbed.NodeInputs{Host: "shutdown-n0", PageURL: "http://" + freeAddr(t) + "/metrics",
		SysfsRoot: filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), FRDir: t.TempDir()}
	startAgent := func() (*process, testbed.AgentAddrs) {
		addrs := testbed.AgentAddrs{Health: freeAddr(t), OTLPHTTP: freeAddr(t), OTLPGRPC: freeAddr(t), Telemetry: freeAddr(t)}
		env, err := node.AgentEnv(brokerAddr, state, addrs, false)
		if err != nil {
			t.Fatal(err)
		}
		a := startProcess(t, "agent", env, agentBin,
			"--config", filepath.Join(root, "distributions", "agent", "config.yaml"), "--config", override)
		waitHTTP(t, "http://"+addrs.Health+"/", a)
		return a, addrs
	}
	agent, addrs := startAgent()
	metricsURL := "http://" + addrs.OTLPHTTP + "/v1/metrics"
	telemetry := "http://" + addrs.Telemetry + "/metrics"

	// The producer is connected before the outage.
	postOTLP(t, metricsURL, markerMetrics(t, "e2e.shutdown.before", 0))
	eventually(t, 90*time.Second, "a metric sent before the outage in otlp_metrics", func() error {
		return topicContains(t, brokerAddr, "otlp_metrics", "e2e.shutdown.before")
	}, agent, broker)

	broker.stop(t)
	// Accepted during the outage, one of each signal: they must survive the
	// SIGTERM on disk. Two requests each, so that each exporter has a send
	// in flight and more waiting in its queue.
	queuedMarkers := map[string]string{"otlp_metrics": "e2e.shutdown.queued", "otlp_logs": "e2e-shutdown-queued-log", "otlp_spans": "e2e-shutdown-queued-job"}
	for range 2 {
		postOTLP(t, metricsURL, markerMetrics(t, queuedMarkers["otlp_metrics"], 0))
		logs, err := markedLogs(queuedMarkers["otlp_logs"]).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		postOTLP(t, "http://"+addrs.OTLPHTTP+"/v1/logs", logs)
		postOTLP(t, "http://"+addrs.OTLPHTTP+"/v1/traces", floodTraces(t, 10, queuedMarkers["otlp_spans"]))
		time.Sleep(1500 * time.Millisecond) // past the batch processor's timeout
	}

	// Senders without a timeout, as a script whose exporter has none: each
	// sends 256 KiB requests in a loop until the test ends.
	fill := markerMetrics(t, "e2e.shutdown.fill", 2000)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var accepted, refused, failed atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, metricsURL, bytes.NewReader(fill))
				req.Header.Set("Content-Type", "application/x-protobuf")
				resp, err := http.DefaultClient.Do(req)
				switch {
				case err != nil:
					failed.Add(1)
				case resp.StatusCode == http.StatusOK:
					accepted.Add(1)
				default:
					refused.Add(1)
				}
				if resp != nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					sleepCtx(ctx, 50*time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	queued := func() float64 {
		return telemetrySum(t, telemetry, "otelcol_exporter_queue_size", `exporter="kafka"`, `data_type="metrics"`)
	}
	eventually(t, 60*time.Second, "the metrics queue full", func() error {
		if q := queued(); q < queueFullBytes-2*float64(len(fill)) {
			return fmt.Errorf("metrics queue holds %v bytes of %d", q, queueFullBytes)
		}
		return nil
	}, agent)
	// Requests keep arriving at the full queue for a while: some are in
	// flight when SIGTERM comes, and none is held by it.
	answeredWhenFull := accepted.Load() + refused.Load()
	time.Sleep(2 * time.Second)
	answeredSince := accepted.Load() + refused.Load() - answeredWhenFull
	enqueueFailed := telemetrySum(t, telemetry, "otelcol_exporter_enqueue_failed_metric_points", `exporter="kafka"`)
	t.Logf("during the outage: %d requests accepted, %d refused, %d failed (%d answered in the 2 s before SIGTERM, the queue full); queue %v bytes; kafka exporter refused %v points",
		accepted.Load(), refused.Load(), failed.Load(), answeredSince, queued(), enqueueFailed)

	if err := agent.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took := waitExit(t, agent, 2*time.Minute)
	t.Logf("agent exited %s after SIGTERM (Kafka down, metrics queue full, 4 senders in flight)", took.Round(100*time.Millisecond))
	if took > shutdownBound {
		t.Errorf("the agent took %s to exit on SIGTERM, want under %s", took, shutdownBound)
	}
	if code := agent.ExitCode(); code != 0 {
		t.Errorf("agent exited with status %d after SIGTERM, want 0", code)
	}
	// What the full queue refused was counted where it was refused, and
	// the senders were answered, not held.
	if enqueueFailed == 0 {
		t.Error("otelcol_exporter_enqueue_failed_metric_points of the kafka exporter is 0 with the queue full")
	}
	if answeredSince < 4 {
		t.Errorf("%d OTLP requests answered in the 2 s before SIGTERM with the queue full: the senders were held", answeredSince)
	}
	cancel()
	wg.Wait()

	// The queues survived on disk: the next agent sends what the first
	// accepted during the outage.
	broker = startShutdownBroker(t, brokerBin, brokerAddr)
	agent, _ = startAgent()
	for topic, marker := range queuedMarkers {
		eventually(t, 2*time.Minute, "what was queued during the outage in "+topic, func() error {
			return topicContains(t, brokerAddr, topic, marker)
		}, agent, broker)
	}
}

// startShutdownBroker starts the Kafka-protocol broker on addr with the
// agent's topics and waits until it is ready.
func startShutdownBroker(t *testing.T, bin, addr string) *process {
	ready := filepath.Join(t.TempDir(), "ready")
	b := startProcess(t, "kfakebroker", nil, bin,
		"-listen", addr, "-advertise", addr, "-ready-file", ready,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	eventually(t, 30*time.Second, "broker ready", func() error {
		_, err := os.Stat(ready)
		return err
	}, b)
	return b
}

// waitExit waits up to limit for p to exit after a signal and returns how
// long it took.
func waitExit(t *testing.T, p *process, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	eventually(t, limit, p.Name()+" exits on SIGTERM", func() error {
		if !p.exited() {
			return errors.New("still running")
		}
		return nil
	})
	return time.Since(start)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// markerMetrics is one OTLP/HTTP metrics request, as protobuf: a gauge
// named name with points data points (at least one) of ~100 bytes each.
func markerMetrics(t *testing.T, name string, points int) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "e2e-shutdown")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	dps := m.SetEmptyGauge().DataPoints()
	now := pcommon.NewTimestampFromTime(time.Now())
	for i := range max(points, 1) {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetIntValue(int64(i))
		dp.Attributes().PutStr("pad", fmt.Sprintf("%08d-%s", i, strings.Repeat("x", 80)))
	}
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// topicContains reads topic from the start and returns nil once a record
// holds marker (OTLP protobuf keeps strings as they are).
func topicContains(t *testing.T, broker, topic, marker string) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fetches := client.PollFetches(ctx)
		cancel()
		if fetches.NumRecords() == 0 {
			return fmt.Errorf("no record holding %q in %s", marker, topic)
		}
		found := false
		fetches.EachRecord(func(rec *kgo.Record) {
			found = found || bytes.Contains(rec.Value, []byte(marker))
		})
		if found {
			return nil
		}
	}
}
