//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pmetric"
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
	startBroker := func() *process {
		ready := filepath.Join(t.TempDir(), "ready")
		b := startProcess(t, "kfakebroker", nil, brokerBin,
			"-listen", brokerAddr, "-advertise", brokerAddr, "-ready-file", ready,
			"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
		eventually(t, 30*time.Second, "broker ready", func() error {
			_, err := os.Stat(ready)
			return err
		}, b)
		return b
	}
	broker := startBroker()

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
	// No speed is measured: the wait only bounds a hang, which used to last
	// until SIGKILL.
	eventually(t, 3*time.Minute, "agent exits on SIGTERM with Kafka down", func() error {
		if !agent.exited() {
			return errors.New("still running")
		}
		return nil
	})
	if code := agent.ExitCode(); code != 0 {
		t.Errorf("agent exited with status %d after SIGTERM, want 0", code)
	}

	// From now on the fixture shows another value: the marker can reach
	// Kafka only from the queue on disk.
	writeFileAtomic(t, xmitFile, strconv.FormatUint(fixtureXmitWords, 10)+"\n")
	broker = startBroker()
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
