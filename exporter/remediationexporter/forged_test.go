package remediationexporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// forgedFaultID is not what the correlator would compute for any fault:
// an entry for it can only come from the forged record.
const forgedFaultID = "f0f0f0f0deadbeef"

// forgedDBE is a log record that claims to be a correlator fault record: every
// fault.* attribute of an open P1 DBE on xl003, the fault event name, and
// the XID 48 the DCGM receiver would report with it.
func forgedDBE(scope string, at time.Time) plog.Logs {
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	r.ID = forgedFaultID
	r.FirstSeen, r.LastSeen = at, at
	return logsOf(scope, r)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// runCollector runs an in-process collector: OTLP/HTTP in → faultcorrelator
// (gateway) → remediation (dry run), as the gateway wires them.
func runCollector(t *testing.T, otlpAddr, auditFile string) {
	t.Helper()
	cfgYAML := fmt.Sprintf(`
receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
connectors:
  faultcorrelator:
    mode: gateway
    evaluation_interval: 100ms
exporters:
  remediation:
    dry_run: true
    audit_file: %q
service:
  telemetry:
    logs: {level: warn}
    metrics: {level: none}
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [faultcorrelator]
    logs/faults:
      receivers: [faultcorrelator]
      exporters: [remediation]
`, otlpAddr, auditFile)
	factories := func() (otelcol.Factories, error) {
		f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
		var err1, err2, err3 error
		f.Receivers, err1 = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
		f.Connectors, err2 = otelcol.MakeFactoryMap[connector.Factory](faultcorrelatorconnector.NewFactory())
		f.Exporters, err3 = otelcol.MakeFactoryMap[exporter.Factory](NewFactory())
		return f, errors.Join(err1, err2, err3)
	}
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol-gpu-test", Version: "dev"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs:              []string{"yaml:" + cfgYAML},
			ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
		}},
		SkipSettingGRPCLogger: true,
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- col.Run(context.Background()) }()
	t.Cleanup(func() {
		col.Shutdown()
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("collector stopped at start: %v", err)
		default:
		}
		return col.GetState() == otelcol.StateRunning
	}, 30*time.Second, 10*time.Millisecond)
}

func postOTLP(t *testing.T, addr string, ld plog.Logs) {
	t.Helper()
	body, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/v1/logs", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// A fault record forged by any OTLP sender, even under the correlator's own
// scope name, is renamed at the correlator's edge (fault.StripForged) and
// never reaches the remediation exporter as a fault. The XID 48 it carries
// is a genuine signal, though: the correlator opens its own fault from it,
// under its own id, and that record reaching the exporter and being acted on
// is the proof the pipeline ran, and that the exporter accepts what the real
// correlator writes (its scope, semconv.ScopeFaultRecords, and its record
// shape).
func TestForgedFaultOverOTLPDoesNothing(t *testing.T) {
	otlpAddr := freeAddr(t)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	runCollector(t, otlpAddr, auditFile)

	postOTLP(t, otlpAddr, forgedDBE(semconv.ScopeFaultRecords, time.Now()))

	// Wait for the correlator's own record of the XID to be decided.
	var genuine []audit.Entry
	require.Eventually(t, func() bool {
		genuine = auditEntries(t, auditFile, func(e audit.Entry) bool {
			return e.FaultID != "" && e.FaultID != forgedFaultID && e.Node == "xl003"
		})
		return len(genuine) > 0
	}, 30*time.Second, 20*time.Millisecond, "the correlator never emitted a fault for the XID: the pipeline did not run")
	// The record the real correlator wrote is accepted: its scope is the
	// one the exporter acts on and it parses (a refused record is audited
	// as "not a correlator record", without a fault id), so it is decided.
	assert.Equal(t, audit.DecisionDryRun, genuine[0].Decision)
	for _, e := range readAudit(t, auditFile) {
		assert.NotContains(t, e.Reason, "not a correlator record", "the exporter refused a record of the real correlator")
	}

	// Evaluations after the genuine fault opened: still nothing with the
	// forged id, neither decided nor skipped.
	assert.Empty(t, auditEntries(t, auditFile, func(e audit.Entry) bool { return e.FaultID == forgedFaultID }),
		"the forged fault id reached the remediation exporter")
	for _, e := range readAudit(t, auditFile) {
		assert.NotContains(t, e.Reason, forgedFaultID)
	}
}

// The second check: a record that did not come from the correlator's
// pipeline (another scope) is skipped by the exporter itself.
func TestForgedFaultOutsideCorrelatorScopeIsSkipped(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.AuditFile = filepath.Join(t.TempDir(), "audit.jsonl")
	platform := newMemPlatform(1000)
	exp, err := newRemediationExporter(cfg, componenttest.NewNopTelemetrySettings(), dependencies{platform: platform})
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })

	require.NoError(t, exp.ConsumeLogs(context.Background(), forgedDBE("github.com/otelcol-gpu/otelcol-gpu/receiver/otlp", time.Now())))

	entries := readAudit(t, cfg.AuditFile)
	require.Len(t, entries, 1)
	assert.Equal(t, audit.DecisionSkipped, entries[0].Decision)
	assert.Equal(t, stepRecord, entries[0].Step)
	assert.Contains(t, entries[0].Reason, "not a correlator record")
	q, r := platform.counts()
	assert.Zero(t, q+r)
}

// The trust tests extended to repairs: nothing but a confirmed fault this
// exporter quarantined for starts a repair. A forged record (another
// scope), a record naming a node the platform leaves alone (a ghost, a
// node someone else cordoned) and a fault the policy does not quarantine
// for make no agent call and no repair entry, however long the loop runs.
func TestForgedFaultTriggersNoRepair(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5", "GPU-ghost-5", "GPU-theirs-5", "GPU-xl004-5")
	h := newHarness(t, withRepair(agent))
	h.platform.skips = map[string]actuator.Outcome{"ghost": actuator.SkipNotFound, "theirs": actuator.SkipForeign}

	require.NoError(t, h.exp.ConsumeLogs(context.Background(), forgedDBE("github.com/otelcol-gpu/otelcol-gpu/receiver/otlp", h.clock.Now())))
	require.NoError(t, h.consume(
		faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "ghost", fault.StateOpen),
		faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "theirs", fault.StateOpen),
		faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP3, "xl004", fault.StateOpen), // recorded only: no quarantine
	))
	h.tickUntil(100, func() bool { return false })

	agent.mu.Lock()
	assert.Empty(t, agent.calls, "no agent call")
	agent.mu.Unlock()
	assert.Empty(t, auditEntries(t, h.auditLog, func(e audit.Entry) bool { return e.Step == stepRepair }), "no repair entry")
	h.exp.mu.Lock()
	assert.Empty(t, h.exp.state.RepairLoops())
	h.exp.mu.Unlock()
}
