//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension"
)

// deadlineQueued is how many remote-write requests wait in the central's
// in-memory queue behind the one in flight: drained at shutdown one
// attempt of 5 s each against a Prometheus that never answers, 200 s.
const deadlineQueued = 40

// The last unbounded shutdown (issue 29): the small-cluster central's
// Prometheus remote write queues in memory, and exporterhelper drains that
// queue at shutdown one attempt per request, so against a Prometheus that
// accepts connections and never answers SIGTERM costs the attempt's
// timeout (5 s) per queued request. With 40 queued the central would run
// for minutes; the shutdown_deadline extension (25 s) ends it within 30 s
// with status 124, and its log names the deadline and the remote-write
// exporter that held the process.
func TestSIGTERMOfTheCentralWithRemoteWriteHung(t *testing.T) {
	gatewayBin := smallClusterGateway(t)
	pki := newTestPKI(t, t.TempDir())
	const node = "deadline-n0"
	token := fmt.Sprintf("token-of-%s-%x", node, time.Now().UnixNano())
	tokensFile := filepath.Join(t.TempDir(), "agent-tokens")
	if err := os.WriteFile(tokensFile, []byte(token+" "+node+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := newBlackHole(t)
	central := newSmallClusterCentral(t, gatewayBin, "http://"+prom.addr()+"/api/v1/write", pki, tokensFile, newLogSink(t))
	central.start(t)
	telemetry := "http://" + central.telemetry + "/metrics"

	// What an agent sends: each request one queue entry of remote write.
	for i := range deadlineQueued + 1 {
		if err := sendCentral(central, pki, token, nil, fillerMetrics(t, node, i)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	queued := func() float64 {
		return telemetrySum(t, telemetry, "otelcol_exporter_queue_size", `exporter="prometheus_remote_write"`)
	}
	eventually(t, 30*time.Second, "one remote write in flight to the hung Prometheus, the rest queued in memory", func() error {
		if prom.accepted() == 0 {
			return errors.New("no connection to Prometheus yet")
		}
		if q := queued(); q < deadlineQueued-1 {
			return fmt.Errorf("remote write's queue holds %v requests, want %d", q, deadlineQueued)
		}
		return nil
	}, central.proc)
	t.Logf("before SIGTERM: %v remote-write requests queued in memory, %d connections held by Prometheus", queued(), prom.accepted())

	if err := central.proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took := waitExit(t, central.proc, 2*time.Minute)
	t.Logf("central exited %s after SIGTERM with status %d", took.Round(100*time.Millisecond), central.proc.ExitCode())
	if took > shutdownBound {
		t.Errorf("the central took %s to exit on SIGTERM, want under %s", took, shutdownBound)
	}
	if code := central.proc.ExitCode(); code != shutdowndeadlineextension.ExitCode {
		t.Errorf("central exited with status %d, want %d (the shutdown deadline's)", code, shutdowndeadlineextension.ExitCode)
	}
	raw, err := os.ReadFile(central.proc.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var record string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, "did not finish within the shutdown deadline") {
			record = line
		}
	}
	if record == "" {
		t.Fatalf("the central's log does not say the shutdown deadline passed")
	}
	for _, want := range []string{`"deadline": "25s"`, "goroutine profile: total", "prometheusremotewriteexporter"} {
		if !strings.Contains(record, want) {
			t.Errorf("the deadline's record lacks %q: %.2000s", want, record)
		}
	}
}

// fillerMetrics is an OTLP metrics request of node's: one gauge point that
// nothing detects on.
func fillerMetrics(t *testing.T, node string, i int) []byte {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", node)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("e2e.shutdown.filler")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	dp.SetIntValue(int64(i))
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
