//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 31, step 1 of adoption: the real agent with
// distributions/agent/standalone.yaml and nothing else running (no Kafka,
// no gateway) reads a node's dcgm-exporter page (the exporter source),
// serves it again under dcgm-exporter's names, and when the page's last
// XID turns to 79 writes a fault record for that GPU as a log line and
// counts it open on its telemetry page; no line of its log is an error.
func TestStandaloneAgentNeedsNothingElse(t *testing.T) {
	const node = "gpu-node-1"
	page := exporterPageOf(t, "cncf-k8s-ai-conformance_kops_NVIDIA-L4_dcgm-exporter-metrics.prom", node)
	labels := regexp.MustCompile(`(?m)^DCGM_FI_DEV_GPU_TEMP(\{[^}]*\})`).FindSubmatch(page)
	if labels == nil {
		t.Fatal("no DCGM_FI_DEV_GPU_TEMP series in the fixture")
	}
	uuid := regexp.MustCompile(`UUID="([^"]+)"`).FindSubmatch(labels[1])[1]
	// the page as dcgm-exporter serves it with the last XID labelled
	withXID := func(code int, msg string) []byte {
		gpu := strings.TrimSuffix(string(labels[1]), "}")
		return append(bytes.Clone(page), fmt.Sprintf("# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"+
			"# TYPE DCGM_FI_DEV_XID_ERRORS gauge\nDCGM_FI_DEV_XID_ERRORS%s,err_code=\"%d\",err_msg=\"%s\"} %d\n", gpu, code, msg, code)...)
	}
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if scrapes.Add(1) <= 3 {
			_, _ = w.Write(withXID(0, "No Error"))
			return
		}
		_, _ = w.Write(withXID(79, "GPU has fallen off the bus"))
	}))
	t.Cleanup(srv.Close)

	listen, telemetry, health := freeAddr(t), freeAddr(t), freeAddr(t)
	_, telemetryPort, _ := strings.Cut(telemetry, ":")
	storage := t.TempDir()
	env := []string{"GPU_SOURCE=exporter", "DCGM_ENDPOINT=" + srv.URL + "/metrics", "OTELCOL_GPU_HOST_NAME=" + node,
		"DCGM_EXPORTER_LISTEN=" + listen, "DCGM_EXPORTER_INTERVAL=1000", "GPU_COLLECTION_INTERVAL=1s", "GPU_KMSG=false",
		"SYSFS_ROOT=" + t.TempDir(), "OTELCOL_GPU_TELEMETRY_PORT=" + telemetryPort, "OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
		"OTELCOL_GPU_STORAGE_DIR=" + storage, "KAFKA_BROKERS=127.0.0.1:1"}
	config := filepath.Join(repoRoot(t), "distributions", "agent", "standalone.yaml")
	agent := startProcess(t, "agent-standalone", env, binary(t, "otelcol-gpu-agent"), "--config", config)

	get := func(url string) (string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	eventually(t, 60*time.Second, "the XID 79 on the agent's page with dcgm-exporter's labels", func() error {
		body, err := get("http://" + listen + "/metrics")
		if err != nil {
			return err
		}
		for _, want := range []string{`err_code="79"`, `err_msg="GPU has fallen off the bus"`, `Hostname="` + node + `"`, "DCGM_FI_DEV_GPU_TEMP{"} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("%s not on the page yet", want)
			}
		}
		return nil
	}, agent)
	eventually(t, 60*time.Second, "the fault record of the GPU as a log line", func() error {
		log, err := os.ReadFile(agent.LogPath())
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "gpu.fell_off_bus") && strings.Contains(line, string(uuid)) {
				t.Logf("fault line: %s", line)
				return nil
			}
		}
		return fmt.Errorf("no line names gpu.fell_off_bus and %s yet", uuid)
	}, agent)
	eventually(t, 30*time.Second, "the open fault on the telemetry page", func() error {
		body, err := get("http://" + telemetry + "/metrics")
		if err != nil {
			return err
		}
		if !regexp.MustCompile(`otelcol_faultcorrelator_faults_open\{[^}]*fault_type="gpu.fell_off_bus"[^}]*\} 1`).MatchString(body) {
			return fmt.Errorf("no open gpu.fell_off_bus fault counted yet")
		}
		return nil
	}, agent)
	if body, err := get("http://" + health); err != nil || !strings.Contains(body, "Server available") {
		t.Errorf("health check: %q, %v", body, err)
	}

	agent.stop(t)
	log, err := os.ReadFile(agent.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "\terror\t") || strings.Contains(strings.ToLower(line), "kafka") {
			t.Errorf("the standalone agent logged: %s", line)
		}
	}
	if entries, _ := os.ReadDir(storage); len(entries) != 0 {
		t.Errorf("the standalone agent wrote under its storage directory: %v", entries)
	}
}

// Issue 31: the shipped binary's validate refuses a bare number where a Go
// duration is read (GPU_COLLECTION_INTERVAL=10 is 10 ns), naming the key,
// and accepts dcgm-exporter's DCGM_EXPORTER_INTERVAL in milliseconds.
func TestValidateRefusesABareNumberInterval(t *testing.T) {
	agent := binary(t, "otelcol-gpu-agent")
	dir := filepath.Join(repoRoot(t), "distributions", "agent")
	cmd := exec.Command(agent, "validate", "--config", filepath.Join(dir, "config.yaml"))
	cmd.Env = append(os.Environ(), "GPU_COLLECTION_INTERVAL=10")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("validate accepted GPU_COLLECTION_INTERVAL=10:\n%s", out)
	}
	if !strings.Contains(string(out), "collection_interval: 10ns is under the 100ms floor") {
		t.Errorf("validate's error does not name the key and the floor:\n%s", out)
	}
	cmd = exec.Command(agent, "validate", "--config", filepath.Join(dir, "standalone.yaml"))
	cmd.Env = append(os.Environ(), "DCGM_EXPORTER_INTERVAL=30000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("validate refused DCGM_EXPORTER_INTERVAL=30000 (30 s): %v\n%s", err, out)
	}
}
