//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// buildVersion is what make stamps into the binaries (Makefile
// BUILD_VERSION): the VERSION file's release and this checkout's commit.
// The -dirty suffix depends on whether tracked files differed when make
// ran, so either form is accepted; version and commit must match.
func buildVersion(t *testing.T) *regexp.Regexp {
	t.Helper()
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(version) {
		t.Fatalf("VERSION holds %q, want MAJOR.MINOR.PATCH", version)
	}
	cmd := exec.Command("git", "rev-parse", "--short=12", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git rev-parse --short=12 HEAD in %s: %v (the test needs the git checkout the binaries were built from)", root, err)
	}
	commit := strings.TrimSpace(string(out))
	return regexp.MustCompile(`^` + regexp.QuoteMeta(version+"+"+commit) + `(-dirty)?$`)
}

// TestVersionAndCommit: every binary's --version names the release and the
// commit, and its own telemetry reports the same as service.version.
func TestVersionAndCommit(t *testing.T) {
	want := buildVersion(t)
	for _, name := range []string{"otelcol-gpu-agent", "otelcol-gpu-gateway", "otelcol-gpu"} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(binary(t, name), "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", name, err, out)
			}
			fields := strings.Fields(string(out))
			if len(fields) != 3 || fields[0] != name || fields[1] != "version" || !want.MatchString(fields[2]) {
				t.Fatalf("%s --version printed %q, want %q version matching %s (make build restamps a binary whose commit changed)", name, out, name, want)
			}
		})
	}

	// service.version in the agent's internal telemetry (target_info on
	// its Prometheus endpoint), which is what a fleet's dashboards read.
	t.Run("service.version in telemetry", func(t *testing.T) {
		root := repoRoot(t)
		health, telemetry := freeAddr(t), freeAddr(t)
		agent := startProcess(t, "agent", []string{
			"KAFKA_BROKERS=" + freeAddr(t),
			"SYSFS_ROOT=" + filepath.Join(root, "receiver", "ibreceiver", "testdata", "procfs-sys"),
			"OTELCOL_GPU_STORAGE_DIR=" + t.TempDir(),
			"OTLP_GRPC_ENDPOINT=" + freeAddr(t),
			"OTLP_HTTP_ENDPOINT=" + freeAddr(t),
			"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
			"OTELCOL_GPU_TELEMETRY_PORT=" + port(telemetry),
		}, binary(t, "otelcol-gpu-agent"), "--config", filepath.Join(root, "distributions", "agent", "config.yaml"))
		waitHTTP(t, "http://"+health+"/", agent)
		serviceVersion := regexp.MustCompile(`service_version="([^"]*)"`)
		var got string
		eventually(t, 30*time.Second, "service_version on the agent's telemetry endpoint", func() error {
			resp, err := http.Get("http://" + telemetry + "/metrics")
			if err != nil {
				return err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			m := serviceVersion.FindSubmatch(body)
			if m == nil {
				return fmt.Errorf("no service_version label in %d bytes of telemetry", len(body))
			}
			got = string(m[1])
			return nil
		}, agent)
		if !want.MatchString(got) {
			t.Errorf("service.version = %q, want one matching %s", got, want)
		}
	})
}
