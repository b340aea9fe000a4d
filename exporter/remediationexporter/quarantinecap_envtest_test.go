//go:build envtest

package remediationexporter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/faultconsoletest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The measured limit of issue 29, held: whoever forges hardware signals
// gets 10 % of a 100-node fleet quarantined; a genuine DBE on another node
// is then refused by the quarantine cap. Now the refusal is counted, the
// DBE waits (gauge), the breaker trips (when configured, and not when
// turned off), the fault console attached to the exporter shows the cap
// reached, and the shipped alert fires from the exporter's own series
// (promtool). The operator's way out, through the console: release a
// forged node, reset the breaker: the DBE is acted on and the banner goes.
func TestEnvtestQuarantineCapTellsSomeone(t *testing.T) {
	cp := startControlPlane(t)
	t.Run("TripsTheBreaker", func(t *testing.T) { testCapFleet(t, cp, "capon", true) })
	t.Run("TripOff", func(t *testing.T) { testCapFleet(t, cp, "capoff", false) })
}

func testCapFleet(t *testing.T, cp *controlPlane, pool string, trip bool) {
	ctx := context.Background()
	hook, url := newSignedHook(t)
	// The breaker's budget: 10 of 100 per hour, as shipped, with the trip;
	// without it 20, so that the budget is not what holds the DBE once a
	// release makes room (it would trip on its own at the 11th admission).
	share := 0.1
	if !trip {
		share = 0.2
	}
	cfg := cp.kubeConfig(t, url, pool, share)
	cfg.MaxQuarantinedFraction = 0.1
	cfg.QuarantineCapTripsBreaker = trip
	cfg.Console = testConsoleID.String()
	fc := faultconsoletest.Start(t, "cap", nil)
	exp, metrics := startWithMetrics(t, cfg, extHost{testConsoleID: fc.Extension})
	require.Eventually(t, exp.leader.IsLeader, 30*time.Second, 10*time.Millisecond, "exporter never took the lease")
	client := &consoleclient.Client{BaseURL: fc.BaseURL, Token: faultconsoletest.Token}

	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("%s%03d", pool, i)
	}
	cp.createGPUNodes(t, pool, names...)

	// Forged-looking P1s (one source naming ten nodes it does not run on)
	// are accepted: ten nodes quarantined, the breaker's budget spent.
	var forged []fault.Record
	for _, n := range names[:10] {
		forged = append(forged, faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, n, fault.StateOpen))
	}
	consumeRecords(t, exp, forged...)
	require.Len(t, cp.quarantinedIn(t, pool), 10)

	// The genuine DBE on another node: refused by the cap.
	victim := names[50]
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, victim, fault.StateOpen)
	consumeRecords(t, exp, dbe)
	assert.False(t, cp.node(t, victim).Spec.Unschedulable, "the DBE's node is not quarantined")
	assert.Len(t, cp.quarantinedIn(t, pool), 10)
	capped := auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionSkipped, victim))
	require.Len(t, capped, 1)
	assert.Equal(t, "quarantine cap: 10 of 100 GPU nodes already quarantined by this exporter (max_quarantined_fraction 0.1 allows 10)", capped[0].Reason)

	// The counter and the gauge rise.
	points := collect(t, metrics)
	assert.Equal(t, int64(1), points.value(t, "otelcol_remediation_quarantine_cap_refusals", "platform", "kubernetes", "severity", "P1"))
	assert.Equal(t, int64(1), points.value(t, "otelcol_remediation_quarantine_cap_waiting", "platform", "kubernetes", "severity", "P1"))
	assert.Equal(t, int64(1), points.value(t, "otelcol_remediation_decisions", "action", "quarantine", "outcome", "refused", "rail", "quarantine_cap"))

	// The breaker trips when configured, and not when turned off.
	state := cp.breakerState(t, pool)
	trips := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.Step == stepBreaker && e.Event == breakerEventTripped && e.Decision == audit.DecisionActed
	})
	if trip {
		assert.Contains(t, state, `"tripped":true`)
		assert.Contains(t, state, `"reason":"tripped by the quarantine cap: gpu.memory.dbe `+dbe.ID+` (P1) on `+victim+` refused, 10 of 100 GPU nodes`)
		require.Len(t, trips, 1)
		assert.Equal(t, dbe.ID, trips[0].FaultID)
		assert.Len(t, hook.deliveriesWith("breaker_tripped"), 1, "paged once")
		assert.Equal(t, int64(1), points.value(t, "otelcol_remediation_breaker_tripped", "platform", "kubernetes"))
		assert.Equal(t, int64(1), points.value(t, "otelcol_remediation_breaker_trips", "platform", "kubernetes"))
	} else {
		assert.Contains(t, state, `"tripped":false`)
		assert.Empty(t, trips)
		assert.Empty(t, hook.deliveriesWith("breaker_tripped"))
		assert.Equal(t, int64(0), points.value(t, "otelcol_remediation_breaker_tripped", "platform", "kubernetes"))
	}

	// The console (the real extension, through its HTTP API): the cap
	// reached, 10 of 10 held, the DBE waiting; the page carries the banner.
	b, _, err := client.Breaker(ctx)
	require.NoError(t, err)
	assert.Equal(t, trip, b.Tripped)
	require.NotNil(t, b.QuarantineCap)
	c := b.QuarantineCap
	assert.True(t, c.Reached)
	assert.Equal(t, 10, c.Held)
	assert.Equal(t, 10, c.Limit)
	assert.Equal(t, 100, c.GPUNodes)
	assert.Equal(t, trip, c.TripsBreaker)
	require.Len(t, c.Waiting, 1)
	assert.Equal(t, dbe.ID, c.Waiting[0].FaultID)
	assert.Equal(t, victim, c.Waiting[0].Node)
	assert.Equal(t, "P1", c.Waiting[0].Severity)
	if trip {
		require.NotEmpty(t, b.History)
		assert.Contains(t, b.History[len(b.History)-1].Reason, "tripped by the quarantine cap")
	}
	resp, err := http.Get(fc.BaseURL + "/")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(page), `id="cap-banner"`)

	// The shipped alert fires from these series (and the breaker's alert
	// with the trip only).
	firing := map[string]bool{"RemediationQuarantineCapReached": true, "RemediationBreakerTripped": trip}
	promtoolAlerts(t, points, firing, 1)

	// The operator's way out: release a forged node (and reset the breaker
	// it tripped): the DBE is acted on, the banner and the alert clear.
	action := consoleclient.Action{Operator: "alice", Reason: "forged: gpu.unresponsive from a training pod"}
	checks := collect(t, metrics).value(t, mCallSeconds, call("check")...)
	_, _, err = client.Release(ctx, names[3], action)
	require.NoError(t, err)
	if trip {
		// The release makes room: the waiting DBE is read again at once,
		// and the tripped breaker holds it until a human resets it.
		require.Eventually(t, func() bool { return collect(t, metrics).value(t, mCallSeconds, call("check")...) > checks },
			30*time.Second, 10*time.Millisecond, "the cap is read again after the release")
		assert.False(t, cp.node(t, victim).Spec.Unschedulable, "the tripped breaker holds the DBE until a human resets it")
		_, _, err = client.ResetBreaker(ctx, action)
		require.NoError(t, err)
	}
	cp.waitNode(t, victim, "the DBE is acted on", quarantined)
	require.Eventually(t, func() bool {
		b, _, err := client.Breaker(ctx)
		return err == nil && b.QuarantineCap != nil && !b.QuarantineCap.Reached
	}, 30*time.Second, 20*time.Millisecond, "the banner clears")
	assert.Len(t, auditEntries(t, cfg.AuditFile, stepDecision(stepQuarantine, audit.DecisionActed, victim)), 1)
	points = collect(t, metrics)
	assert.Equal(t, int64(0), points.value(t, "otelcol_remediation_quarantine_cap_waiting", "platform", "kubernetes", "severity", "P1"))
	promtoolAlerts(t, points, map[string]bool{"RemediationQuarantineCapReached": false}, 0)
}

// startWithMetrics is startFromFactoryOn with the exporter's own metrics
// read back from the SDK.
func startWithMetrics(t *testing.T, cfg *Config, host component.Host) (*remediationExporter, *sdkmetric.ManualReader) {
	t.Helper()
	require.NoError(t, cfg.Validate())
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	set.MeterProvider = mp
	exp, err := NewFactory().CreateLogs(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	re, ok := exp.(*remediationExporter)
	require.True(t, ok)
	return re, reader
}

// point is one data point of a counter or gauge (a histogram's count).
type point struct {
	name   string
	labels map[string]string
	value  int64
}

type points []point

func collect(t *testing.T, r *sdkmetric.ManualReader) points {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	var out points
	add := func(name string, attrs attribute.Set, v int64) {
		labels := map[string]string{}
		for _, kv := range attrs.ToSlice() {
			labels[string(kv.Key)] = kv.Value.AsString()
		}
		out = append(out, point{name: name, labels: labels, value: v})
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]: // its count
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, int64(p.Count))
				}
			}
		}
	}
	return out
}

// value is the point of name with exactly the labels kv (pairs); 0 if none.
func (ps points) value(t *testing.T, name string, kv ...string) int64 {
	t.Helper()
	for _, p := range ps {
		if p.name != name || len(p.labels) != len(kv)/2 {
			continue
		}
		match := true
		for i := 0; i < len(kv); i += 2 {
			match = match && p.labels[kv[i]] == kv[i+1]
		}
		if match {
			return p.value
		}
	}
	return 0
}

// promtoolAlerts runs `promtool test rules` on the shipped rules with the
// exporter's gauges as one gateway replica's series (held for ten
// minutes, as scraped: the collector's telemetry names without suffixes)
// and checks which of the alerts fire at minute 5; waiting is what the
// cap alert's summary counts.
func promtoolAlerts(t *testing.T, ps points, firing map[string]bool, waiting int) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (make e2e-deps installs Debian's prometheus package, which ships it): %v", err)
	}
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var series []string
	for _, p := range ps {
		if p.name != "otelcol_remediation_quarantine_cap_waiting" && p.name != "otelcol_remediation_breaker_tripped" {
			continue
		}
		labels := []string{`job="otelcol-gpu-gateway"`, `instance="gw-0:8889"`}
		for k, v := range p.labels {
			labels = append(labels, fmt.Sprintf("%s=%q", k, v))
		}
		sort.Strings(labels[2:])
		series = append(series, fmt.Sprintf("      - series: '%s{%s}'\n        values: '%dx10'\n", p.name, strings.Join(labels, ", "), p.value))
	}
	require.NotEmpty(t, series)
	var tests strings.Builder
	names := make([]string, 0, len(firing))
	for name := range firing {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&tests, "      - eval_time: 5m\n        alertname: %s\n", name)
		if !firing[name] {
			tests.WriteString("        exp_alerts: []\n")
			continue
		}
		tests.WriteString("        exp_alerts:\n          - exp_labels:\n              severity: P1\n              job: otelcol-gpu-gateway\n              platform: kubernetes\n")
		tests.WriteString("            exp_annotations:\n")
		switch name {
		case "RemediationQuarantineCapReached":
			fmt.Fprintf(&tests, "              summary: '%d fault(s) refused by the remediation quarantine cap on kubernetes are waiting: max_quarantined_fraction of the GPU nodes is already quarantined'\n", waiting)
		case "RemediationBreakerTripped":
			tests.WriteString("              summary: 'Remediation circuit breaker tripped on kubernetes: no node is quarantined until a human resets it'\n")
		}
		fmt.Fprintf(&tests, "              runbook_url: https://github.com/otelcol-gpu/otelcol-gpu/blob/main/docs/runbooks/%s.md\n", name)
	}
	file := "rule_files:\n  - " + rules + "\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" +
		strings.Join(series, "") + "    alert_rule_test:\n" + tests.String()
	path := filepath.Join(t.TempDir(), "cap_test.yaml")
	require.NoError(t, os.WriteFile(path, []byte(file), 0o600))
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s\n%s", out, file)
}
