//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// droppedMetric is the metric docs/examples/*-customize.yaml drop; the
// shipped configs export it (TestAgentKafkaGatewayPrometheus checks its
// value in Prometheus).
const droppedMetric = "ib_port_xmit_wait_total"

// TestCustomizeWithoutRebuild runs the shipped agent and gateway configs with
// the fragments of docs/customizing.md merged over them (--config twice),
// agent -> Kafka -> gateway -> a real Prometheus: every series carries the
// cluster label and the dropped metric never arrives, whichever side the
// fragment is on.
func TestCustomizeWithoutRebuild(t *testing.T) {
	root := repoRoot(t)
	agentFragment := filepath.Join(root, "docs", "examples", "agent-customize.yaml")
	gatewayFragment := filepath.Join(root, "docs", "examples", "gateway-customize.yaml")

	t.Run("agent fragment", func(t *testing.T) {
		customizedPipeline(t, "cluster-a", agentFragment, "", "agent")
	})
	t.Run("gateway fragment", func(t *testing.T) {
		customizedPipeline(t, "cluster-b", "", gatewayFragment, "gateway")
	})
}

// customizedPipeline starts a broker, Prometheus, the gateway and one agent
// on the InfiniBand fixture, each with its fragment when one is given and
// OTELCOL_GPU_CLUSTER_NAME=cluster, and checks what reaches Prometheus.
// filterSide names the process whose fragment drops the metric.
func customizedPipeline(t *testing.T, cluster, agentFragment, gatewayFragment, filterSide string) {
	root := repoRoot(t)
	kcat := lookPath(t, "kcat")
	brokerBin := buildBroker(t)
	prom := startPrometheus(t)

	brokerAddr := freeAddr(t)
	broker := startProcess(t, "kfakebroker", nil, brokerBin,
		"-listen", brokerAddr, "-advertise", brokerAddr,
		"-topics", "otlp_spans,otlp_metrics,otlp_logs,gpu_faults", "-partitions", "3")
	eventually(t, 30*time.Second, "broker accepts connections", func() error {
		return exec.Command(kcat, "-b", brokerAddr, "-L", "-m", "2").Run()
	}, broker)

	sysfs := filepath.Join(t.TempDir(), "sys")
	copyTree(t, filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"), sysfs)

	configArgs := func(shipped, fragment string) []string {
		args := []string{"--config", shipped}
		if fragment != "" {
			args = append(args, "--config", fragment)
		}
		return args
	}

	gwHealth, gwTelemetry := freeAddr(t), freeAddr(t)
	gateway := startProcess(t, "gateway", []string{
		"KAFKA_BROKERS=" + brokerAddr,
		"PROMETHEUS_REMOTE_WRITE_URL=" + prom.writeURL(),
		"LOKI_OTLP_ENDPOINT=http://" + freeAddr(t) + "/otlp",
		"TEMPO_OTLP_ENDPOINT=" + freeAddr(t),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + gwHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(gwTelemetry),
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
		"OTELCOL_GPU_CLUSTER_NAME=" + cluster,
	}, binary(t, "otelcol-gpu-gateway"),
		configArgs(filepath.Join(root, "distributions", "gateway", "config.yaml"), gatewayFragment)...)

	agentHealth, agentTelemetry := freeAddr(t), freeAddr(t)
	agent := startProcess(t, "agent", []string{
		"KAFKA_BROKERS=" + brokerAddr,
		"SYSFS_ROOT=" + sysfs,
		"IB_COLLECTION_INTERVAL=1s",
		"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
		"OTLP_GRPC_ENDPOINT=" + freeAddr(t),
		"OTLP_HTTP_ENDPOINT=" + freeAddr(t),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + agentHealth,
		"OTELCOL_GPU_TELEMETRY_PORT=" + port(agentTelemetry),
		"OTELCOL_GPU_CLUSTER_NAME=" + cluster,
	}, binary(t, "otelcol-gpu-agent"),
		configArgs(filepath.Join(root, "distributions", "agent", "config.yaml"), agentFragment)...)
	all := []*process{broker, gateway, agent, prom.proc}
	waitHTTP(t, "http://"+gwHealth+"/", gateway)
	waitHTTP(t, "http://"+agentHealth+"/", agent)

	// Several of the agent's scrapes reached Prometheus: each scrape's
	// series travel together, so the dropped metric would be there by now.
	eventually(t, 90*time.Second, "three InfiniBand scrapes in Prometheus", func() error {
		s, err := prom.query(`count_over_time(ib_port_state{ib_device="mlx4_0",ib_port="1",ib_state="ACTIVE"}[5m])`, time.Time{})
		if err != nil {
			return err
		}
		if len(s) != 1 {
			return fmt.Errorf("%d series, want 1", len(s))
		}
		if n, err := sampleValue(s[0].Values[0]); err != nil || n < 3 {
			return fmt.Errorf("%v scrapes (%v), want >= 3", n, err)
		}
		return nil
	}, all...)

	series, err := prom.query(`{__name__=~".+"}`, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) < 10 {
		t.Fatalf("Prometheus holds %d series, want the fixture's InfiniBand series (>= 10)", len(series))
	}
	for _, s := range series {
		if got := s.Labels["k8s_cluster_name"]; got != cluster {
			t.Errorf("series %v: k8s_cluster_name = %q, want %q", s.Labels, got, cluster)
		}
		if s.Labels["__name__"] == droppedMetric {
			t.Errorf("the dropped metric reached Prometheus: %v", s.Labels)
		}
	}

	// The fragment, not a missing input, kept it out: its siblings from the
	// same counters/ directory arrived, and on the gateway the filter
	// processor counts the data points it dropped (the agent has no filter
	// processor: its ib receiver never collected the metric).
	sibling := false
	for _, s := range series {
		if s.Labels["__name__"] == "hw_network_io_bytes_total" {
			sibling = true
		}
	}
	if !sibling {
		t.Errorf("no hw_network_io_bytes_total series: the InfiniBand counters did not arrive, so the dropped metric's absence proves nothing")
	}
	if filterSide == "gateway" {
		if n := scrapeCounter(t, "http://"+gwTelemetry+"/metrics", "otelcol_processor_filter_datapoints_filtered"); n <= 0 {
			t.Errorf("the gateway's filter processor dropped %v data points, want > 0", n)
		}
	}
}

// scrapeCounter sums every series of a metric (any suffix such as _total)
// on a collector's Prometheus telemetry endpoint; -1 when there is none.
func scrapeCounter(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", url, line, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	if !found {
		return -1
	}
	return sum
}
