//go:build e2e

// Package e2e runs the real collector binaries end to end: an agent scraping
// a sysfs fixture, a Kafka-protocol broker (kfake) behind a TCP proxy, a
// gateway, and a real Prometheus receiving remote write. `make test` builds
// the binaries and runs it; it fails rather than skips when a program it
// needs is missing.
package e2e

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"gopkg.in/yaml.v3"
)

const (
	scrapeInterval = time.Second

	// procfs-sys fixture, mlx5_0 port 1: port_xmit_data counts 4-byte words.
	fixtureXmitWords = 2880761508848
)

// series selecting the fixture's mlx5_0 port 1 transmit bytes.
const xmitBytes = `hw_network_io_bytes_total{ib_device="mlx5_0",ib_port="1",network_io_direction="transmit"}`

// outageFor is how long the broker is cut off: 60 s in CI, longer under
// `make soak` (E2E_OUTAGE).
func outageFor(t *testing.T) time.Duration {
	s := os.Getenv("E2E_OUTAGE")
	if s == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("E2E_OUTAGE=%q is not a positive duration", s)
	}
	return d
}

func TestAgentKafkaGatewayPrometheus(t *testing.T) {
	root := repoRoot(t)
	outage := outageFor(t)
	agentBin := binary(t, "otelcol-gpu-agent")
	gatewayBin := binary(t, "otelcol-gpu-gateway")
	kcat := lookPath(t, "kcat")
	brokerBin := buildBroker(t)

	prom := startPrometheus(t)

	// Broker and proxy: clients learn the proxy's address from the broker's
	// metadata, so every Kafka connection crosses the proxy.
	brokerAddr, proxyAddr := freeAddr(t), freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", proxyAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	proxy := newTCPProxy(t, proxyAddr, brokerAddr)
	eventually(t, 30*time.Second, "broker accepts connections", func() error {
		return exec.Command(kcat, "-b", proxyAddr, "-L", "-m", "2").Run()
	}, broker)

	sysfs := filepath.Join(t.TempDir(), "sys")
	copyTree(t, filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), sysfs)
	xmitFile := filepath.Join(sysfs, "class", "infiniband", "mlx5_0", "ports", "1", "counters", "port_xmit_data")

	gwHealth, gwTelemetry := freeAddr(t), freeAddr(t)
	gateway := startProcess(t, "gateway", []string{
		"KAFKA_BROKERS=" + proxyAddr,
		"PROMETHEUS_REMOTE_WRITE_URL=" + prom.writeURL(),
		"LOKI_OTLP_ENDPOINT=http://" + freeAddr(t) + "/otlp",
		"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + gwHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(gwTelemetry),
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
	}, gatewayBin, "--config", filepath.Join(root, "distributions", "gateway", "config.yaml"))

	agentHealth, agentTelemetry := freeAddr(t), freeAddr(t)
	agent := startProcess(t, "agent", []string{
		"KAFKA_BROKERS=" + proxyAddr,
		"SYSFS_ROOT=" + sysfs,
		"IB_COLLECTION_INTERVAL=" + scrapeInterval.String(),
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
		"OTLP_GRPC_ENDPOINT=" + freeAddr(t),
		"OTLP_HTTP_ENDPOINT=" + freeAddr(t),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + agentHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(agentTelemetry),
	}, agentBin, "--config", filepath.Join(root, "distributions", "agent", "config.yaml"))
	all := []*process{broker, gateway, agent, prom.proc}
	waitHTTP(t, "http://"+gwHealth+"/", gateway)
	waitHTTP(t, "http://"+agentHealth+"/", agent)

	t.Run("counters arrive with labels and values", func(t *testing.T) {
		host, err := os.Hostname()
		if err != nil {
			t.Fatal(err)
		}
		var labels map[string]string
		eventually(t, 90*time.Second, "fixture value in Prometheus", func() error {
			v, l, err := prom.scalar(xmitBytes)
			if err != nil {
				return err
			}
			if want := float64(fixtureXmitWords * 4); v != want {
				return fmt.Errorf("%s = %v, want %v", xmitBytes, v, want)
			}
			labels = l
			return nil
		}, all...)
		if labels["host_name"] != host {
			t.Errorf("host_name label = %q, want %q (labels %v)", labels["host_name"], host, labels)
		}
		// This machine has no DCGM: the agent's dcgm receiver says so once
		// and retries, and the InfiniBand counters above flow regardless.
		if n := agent.LogCount("GPU source unavailable"); n != 1 {
			t.Errorf("agent logged the missing DCGM %d times, want once", n)
		}

		// Other kinds of series, each checked against the fixture's files.
		for q, want := range map[string]float64{
			`hw_network_io_bytes_total{ib_device="mlx5_0",ib_port="1",network_io_direction="receive"}`:       18126345378 * 4,
			`hw_network_packets_total{ib_device="mlx4_0",ib_port="2",network_io_direction="transmit"}`:       88622850,
			`hw_errors_total{ib_device="mlx5_0",ib_port="1",error_type="symbol_error"}`:                      0,
			`ib_port_xmit_wait_total{ib_device="mlx4_0",ib_port="1"}`:                                        3599,
			`ib_port_hw_counter_total{ib_device="mlx5_0",ib_port="1",ib_hw_counter="local_ack_timeout_err"}`: 131,
			`ib_port_state{ib_device="mlx4_0",ib_port="1",ib_state="ACTIVE"}`:                                4,
			`ib_port_phys_state{ib_device="hfi1_0",ib_port="1",ib_phys_state="LinkUp"}`:                      5,
			`ib_port_rate_bytes_per_second{ib_device="hfi1_0",ib_port="1",ib_link_layer="InfiniBand"}`:       100e9 / 8,
		} {
			v, _, err := prom.scalar(q)
			if err != nil {
				t.Errorf("%v", err)
				continue
			}
			if v != want {
				t.Errorf("%s = %v, want %v", q, v, want)
			}
		}
	})

	t.Run("a changed counter arrives", func(t *testing.T) {
		const newWords = fixtureXmitWords + 1_000_000
		writeFileAtomic(t, xmitFile, strconv.FormatUint(newWords, 10)+"\n")
		eventually(t, 60*time.Second, "new counter value in Prometheus", func() error {
			v, _, err := prom.scalar(xmitBytes)
			if err != nil {
				return err
			}
			if want := float64(newWords * 4); v != want {
				return fmt.Errorf("%s = %v, want %v", xmitBytes, v, want)
			}
			return nil
		}, all...)
	})

	t.Run("every alert and recording rule evaluates against this data", func(t *testing.T) {
		exprs := ruleExpressions(t, filepath.Join(root, "deploy", "prometheus", "rules.yaml"))
		if len(exprs) < 20 {
			t.Fatalf("read %d rule expressions, want the whole file", len(exprs))
		}
		evaluated := 0
		for name, expr := range exprs {
			if _, err := prom.query(expr, time.Time{}); err != nil {
				t.Errorf("rule %s: %v", name, err)
				continue
			}
			evaluated++
		}
		t.Logf("%d rule expressions evaluated on the pipeline's series", evaluated)
		// One that must find this test's InfiniBand ports: every port of
		// the fixture that is up reads state 4.
		samples, err := prom.query(`ib_port_state >= 4`, time.Time{})
		if err != nil || len(samples) == 0 {
			t.Errorf("ib_port_state >= 4: %d series, %v", len(samples), err)
		}
	})

	t.Run("every dashboard query evaluates against this data", func(t *testing.T) {
		checkDashboardQueries(t, prom, map[string]string{agentJob: agentTelemetry, gatewayJob: gwTelemetry}, all...)
	})

	t.Run("kcat reads valid OTLP protobuf from otlp_metrics", func(t *testing.T) {
		out, err := exec.Command(kcat, "-b", proxyAddr, "-t", "otlp_metrics", "-C", "-o", "beginning",
			"-c", "1", "-e", "-q", "-f", "%s").Output()
		if err != nil {
			t.Fatalf("kcat: %v", err)
		}
		md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(out)
		if err != nil {
			t.Fatalf("record of %d bytes is not OTLP protobuf metrics: %v", len(out), err)
		}
		if md.DataPointCount() == 0 {
			t.Fatalf("record holds no data points")
		}
		dev, ok := md.ResourceMetrics().At(0).Resource().Attributes().Get("ib.device")
		if !ok || dev.Str() == "" {
			t.Fatalf("resource has no ib.device attribute: %v", md.ResourceMetrics().At(0).Resource().Attributes().AsRaw())
		}
	})

	t.Run("no scrape is lost while the broker is unreachable", func(t *testing.T) {
		// Start from a point where the pipeline is flowing.
		eventually(t, 30*time.Second, "fresh samples", func() error { return freshSample(prom, time.Now().Add(-5*time.Second)) }, all...)

		cutAt := time.Now()
		proxy.Stop()
		t.Logf("broker unreachable from %s for %s", cutAt.Format(time.RFC3339), outage)
		time.Sleep(outage)
		proxy.Start()
		restoredAt := time.Now()

		// Everything scraped during the outage must arrive, then samples
		// newer than the outage.
		eventually(t, 3*time.Minute+outage, "samples after the outage", func() error {
			return freshSample(prom, restoredAt.Add(2*scrapeInterval))
		}, all...)

		// Raw samples from well before the cut to after the restore.
		to := restoredAt.Add(2 * scrapeInterval)
		lookback := to.Sub(cutAt) + 10*time.Second
		res, err := prom.query(fmt.Sprintf("%s[%ds]", xmitBytes, int(math.Ceil(lookback.Seconds()))), to)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 {
			t.Fatalf("%d series, want 1", len(res))
		}
		samples := res[0].Values
		if len(samples) == 0 {
			t.Fatal("no samples across the outage")
		}
		first, last := sampleTime(samples[0]), sampleTime(samples[len(samples)-1])
		if !first.Before(cutAt) || !last.After(restoredAt) {
			t.Fatalf("samples span %s..%s, want them to cover the outage %s..%s", first, last, cutAt, restoredAt)
		}
		var maxGap time.Duration
		for i := 1; i < len(samples); i++ {
			if gap := sampleTime(samples[i]).Sub(sampleTime(samples[i-1])); gap > maxGap {
				maxGap = gap
			}
		}
		// Scrapes tick every second; a lost scrape would leave a gap of at
		// least two intervals.
		if maxGap >= 2*scrapeInterval {
			t.Errorf("largest gap between samples %s..%s is %s: scrapes were lost", first, last, maxGap)
		}
		t.Logf("%d samples from %s to %s across a %s outage, largest gap %s", len(samples), first.Format(time.TimeOnly), last.Format(time.TimeOnly), outage, maxGap)
	})
}

// freshSample checks that the series has a sample newer than since.
func freshSample(prom *prometheus, since time.Time) error {
	res, err := prom.query(fmt.Sprintf("timestamp(%s)", xmitBytes), time.Time{})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("%d series, want 1", len(res))
	}
	ts, err := sampleValue(res[0].Values[0])
	if err != nil {
		return err
	}
	if last := time.UnixMilli(int64(ts * 1000)); last.Before(since) {
		return fmt.Errorf("newest sample at %s, want after %s", last.Format(time.TimeOnly), since.Format(time.TimeOnly))
	}
	return nil
}

func port(addr string) string {
	_, p, _ := netSplit(addr)
	return p
}

// ruleExpressions reads a Prometheus rule file and returns every rule's
// expression by its alert or record name.
func ruleExpressions(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert+r.Record] = r.Expr
		}
	}
	return out
}
