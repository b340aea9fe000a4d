package dcgmreceiver

// Issue 33's "must show": health-watch incidents from the fake DCGM seam
// open the faults defaults.yaml says, with their evidence. The real dcgm
// receiver (source dcgm over dcgmsrc.FakeDCGM) feeds its logs and metrics
// to the real faultcorrelator connector, built by its factory with its
// default rules; the fault records it emits are read back.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/dcgmsrc"
)

// faultEnv is a healthEnv whose logs and metrics go to a faultcorrelator.
type faultEnv struct {
	*healthEnv
	sink *consumertest.LogsSink
}

func newFaultEnv(t *testing.T, switches ...uint) *faultEnv {
	t.Helper()
	ctx := context.Background()
	cf := faultcorrelatorconnector.NewFactory()
	ccfg := cf.CreateDefaultConfig().(*faultcorrelatorconnector.Config)
	ccfg.EvaluationInterval = 100 * time.Millisecond // the floor
	set := connectortest.NewNopSettings(cf.Type())
	sink := new(consumertest.LogsSink)
	logs, err := cf.CreateLogsToLogs(ctx, set, ccfg, sink)
	require.NoError(t, err)
	metrics, err := cf.CreateMetricsToLogs(ctx, set, ccfg, sink)
	require.NoError(t, err)
	for _, c := range []component.Component{logs, metrics} {
		require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
		t.Cleanup(func() { require.NoError(t, c.Shutdown(context.Background())) })
	}
	e := &faultEnv{healthEnv: newHealthEnv(t, logs, metrics, switches...), sink: sink}
	e.check(t) // DCGM's baseline check
	return e
}

// faults decodes every fault record the correlator emitted so far.
func (e *faultEnv) faults(t *testing.T) []fault.Record {
	t.Helper()
	var out []fault.Record
	for _, lr := range logRecords(e.sink.AllLogs()) {
		r, err := fault.FromLogRecord(lr)
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

// waitOpen waits for the correlator's evaluation (every 100ms, on its own
// goroutine) to open a fault of type ty on entity, and returns it.
func (e *faultEnv) waitOpen(t *testing.T, ty fault.Type, entity fault.Entity) fault.Record {
	t.Helper()
	var got fault.Record
	require.Eventually(t, func() bool {
		for _, r := range e.faults(t) {
			if r.State == fault.StateOpen && r.Type == ty && r.Entity == entity {
				got = r
				return true
			}
		}
		return false
	}, time.Minute, 10*time.Millisecond, "no %s fault on %s", ty, entity)
	return got
}

// settle returns once an evaluation has run after everything consumed so
// far: it raises a sentinel incident (PCIe replays on GPU 0) and waits for
// its fault, which that evaluation opens.
func (e *faultEnv) settle(t *testing.T, keep ...dcgmsrc.FakeIncident) {
	t.Helper()
	e.fake.SetIncidents(append(keep, replaysOnGPU0)...)
	e.check(t)
	e.waitOpen(t, fault.TypeGPUPCIeDegraded, gpuEntity(0))
}

func gpuEntity(i int) fault.Entity {
	return fault.Entity{Kind: fault.EntityGPU, Key: healthGPUs[i].UUID}
}

var nodeEntity = fault.Entity{Kind: fault.EntityNode, Key: "xl003"}

// healthFaultCases is every incident kind defaults.yaml has a rule for:
// the incident DCGM reports and the fault it must open.
var healthFaultCases = []struct {
	system   string
	result   model.HealthResult
	code     int
	name     string
	faultT   fault.Type
	severity fault.Severity
	action   fault.Action
	nvSwitch bool
}{
	{semconv.HealthSystemMemory, model.HealthFail, 4, "DCGM_FR_VOLATILE_DBE_DETECTED", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionCordon, false},
	{semconv.HealthSystemMemory, model.HealthFail, 83, "DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionCordon, false},
	{semconv.HealthSystemMemory, model.HealthFail, 81, "DCGM_FR_UNCONTAINED_ERROR", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionCordon, false},
	{semconv.HealthSystemMemory, model.HealthFail, 80, "DCGM_FR_ROW_REMAP_FAILURE", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionRMAReview, false},
	{semconv.HealthSystemMemory, model.HealthFail, 84, "DCGM_FR_UNCORRECTABLE_ROW_REMAP", fault.TypeGPUMemoryDBE, fault.SeverityP1, fault.ActionRMAReview, false},
	{semconv.HealthSystemNVLink, model.HealthFail, 14, "DCGM_FR_NVLINK_DOWN", fault.TypeNVLinkDegraded, fault.SeverityP1, fault.ActionCordon, false},
	{semconv.HealthSystemNVLink, model.HealthFail, 71, "DCGM_FR_NVLINK_ERROR_CRITICAL", fault.TypeNVLinkDegraded, fault.SeverityP1, fault.ActionCordon, false},
	{semconv.HealthSystemNVSwitchFatal, model.HealthFail, 15, "DCGM_FR_NVSWITCH_FATAL_ERROR", fault.TypeNVLinkDegraded, fault.SeverityP1, fault.ActionCordon, true},
	{semconv.HealthSystemNVSwitchFatal, model.HealthFail, 17, "DCGM_FR_NVSWITCH_DOWN", fault.TypeNVLinkDegraded, fault.SeverityP1, fault.ActionCordon, true},
	{semconv.HealthSystemMemory, model.HealthWarn, 6, "DCGM_FR_PENDING_PAGE_RETIREMENTS", fault.TypeGPUMemoryDBE, fault.SeverityP2, fault.ActionResetGPU, false},
	{semconv.HealthSystemMemory, model.HealthWarn, 85, "DCGM_FR_PENDING_ROW_REMAP", fault.TypeGPUMemoryDBE, fault.SeverityP2, fault.ActionResetGPU, false},
	{semconv.HealthSystemMemory, model.HealthFail, 7, "DCGM_FR_RETIRED_PAGES_LIMIT", fault.TypeGPUMemoryDBE, fault.SeverityP2, fault.ActionRMAReview, false},
	{semconv.HealthSystemMemory, model.HealthFail, 8, "DCGM_FR_RETIRED_PAGES_DBE_LIMIT", fault.TypeGPUMemoryDBE, fault.SeverityP2, fault.ActionRMAReview, false},
	{semconv.HealthSystemNVLink, model.HealthWarn, 13, "DCGM_FR_NVLINK_ERROR_THRESHOLD", fault.TypeNVLinkDegraded, fault.SeverityP2, fault.ActionCordon, false},
	{semconv.HealthSystemNVLink, model.HealthWarn, 70, "DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD", fault.TypeNVLinkDegraded, fault.SeverityP2, fault.ActionCordon, false},
	{semconv.HealthSystemThermal, model.HealthWarn, 10, "DCGM_FR_CLOCKS_EVENT_THERMAL", fault.TypeGPUThermal, fault.SeverityP2, fault.ActionNone, false},
	{semconv.HealthSystemThermal, model.HealthWarn, 40, "DCGM_FR_THERMAL_VIOLATIONS", fault.TypeGPUThermal, fault.SeverityP2, fault.ActionNone, false},
	{semconv.HealthSystemThermal, model.HealthWarn, 42, "DCGM_FR_TEMP_VIOLATION", fault.TypeGPUThermal, fault.SeverityP2, fault.ActionNone, false},
	{semconv.HealthSystemPCIe, model.HealthWarn, 3, "DCGM_FR_PCI_REPLAY_RATE", fault.TypeGPUPCIeDegraded, fault.SeverityP3, fault.ActionNone, false},
	{semconv.HealthSystemMemory, model.HealthWarn, 5, "DCGM_FR_VOLATILE_SBE_DETECTED", fault.TypeGPUECCSBERate, fault.SeverityP3, fault.ActionRMAReview, false},
	{semconv.HealthSystemPower, model.HealthWarn, 12, "DCGM_FR_CLOCKS_EVENT_POWER", fault.TypeGPUPower, fault.SeverityP3, fault.ActionNone, false},
	{semconv.HealthSystemPower, model.HealthWarn, 11, "DCGM_FR_POWER_UNREADABLE", fault.TypeGPUPower, fault.SeverityP3, fault.ActionNone, false},
	{semconv.HealthSystemNVSwitchNonFatal, model.HealthWarn, 16, "DCGM_FR_NVSWITCH_NON_FATAL_ERROR", fault.TypeNVLinkDegraded, fault.SeverityP3, fault.ActionNone, true},
	{semconv.HealthSystemInforom, model.HealthWarn, 9, "DCGM_FR_CORRUPT_INFOROM", fault.TypeGPUInforom, fault.SeverityP3, fault.ActionRMAReview, false},
}

// Every incident kind opens its fault, on the GPU (on the node for an
// NVSwitch), quoting the incident: system, result, code and DCGM's message.
func TestHealthIncidentsOpenTheirFaults(t *testing.T) {
	for _, c := range healthFaultCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newFaultEnv(t, 2)
			in := dcgmsrc.FakeIncident{GPU: 1, System: c.system, Result: c.result, Code: c.code, Message: "DCGM says " + c.name + " on the test device"}
			entity := gpuEntity(1)
			if c.nvSwitch {
				sw := uint(2)
				in.NVSwitch, entity = &sw, nodeEntity
			}
			e.fake.SetIncidents(in)
			e.check(t)
			r := e.waitOpen(t, c.faultT, entity)
			assert.Equal(t, c.severity, r.Severity)
			assert.Equal(t, c.action, r.Action)
			assert.Equal(t, "xl003", r.HostName)
			assert.True(t, strings.HasPrefix(r.Rule, "dcgm_health_"), r.Rule)
			var quoted bool
			for _, ev := range r.Evidence {
				if ev.Signal == semconv.EventGPUHealthIncident+"{"+semconv.AttrGPUHealthErrorName+"="+c.name+"}" {
					quoted = true
					assert.Contains(t, ev.Text, c.system+" "+c.result.String()+" "+c.name)
					assert.Contains(t, ev.Text, in.Message)
					if c.nvSwitch {
						assert.Contains(t, ev.Text, "NVSwitch 2")
					}
				}
			}
			assert.True(t, quoted, "the incident is the fault's evidence: %+v", r.Evidence)
		})
	}
}

// An incident that persists over many checks, or clears and comes back,
// is one fault: the receiver logs it once per appearance and the
// correlator keeps the open fault.
func TestHealthIncidentRepeatedOpensOneFault(t *testing.T) {
	e := newFaultEnv(t)
	e.fake.SetIncidents(dbeOnGPU1)
	for range 5 {
		e.check(t)
	}
	first := e.waitOpen(t, fault.TypeGPUMemoryDBE, gpuEntity(1))
	e.fake.SetIncidents() // cleared
	e.check(t)
	e.fake.SetIncidents(dbeOnGPU1) // and back
	e.check(t)
	e.settle(t, dbeOnGPU1)
	var opened []fault.Record
	for _, r := range e.faults(t) {
		if r.Type == fault.TypeGPUMemoryDBE && r.Entity == gpuEntity(1) {
			assert.Equal(t, first.ID, r.ID, "one fault id")
			if r.State == fault.StateOpen {
				opened = append(opened, r)
			}
		}
	}
	assert.Len(t, opened, 1, "one fault however often the incident is reported")
	assert.Len(t, healthRecords(e.sink.AllLogs()), 0, "the sink holds fault records only")
}

// A cleared incident opens nothing: its record (result pass) is no
// incident to the correlator.
func TestHealthClearedIncidentOpensNothing(t *testing.T) {
	e := newFaultEnv(t)
	xids, err := newXIDCatalogue(nil)
	require.NoError(t, err)
	lb := &logsBuilder{hostName: "xl003", version: "test", xids: xids}
	gpu := model.GPU{Index: 1, UUID: healthGPUs[1].UUID}
	cleared := lb.healthLogs(model.HealthIncident{GPU: gpu, System: semconv.HealthSystemMemory, Result: model.HealthFail, Code: 4,
		CodeName: "DCGM_FR_VOLATILE_DBE_DETECTED", Message: dbeOnGPU1.Message}, model.Owner{}, true, time.Now())
	require.NoError(t, e.r.nextLogs.ConsumeLogs(context.Background(), cleared))
	e.settle(t)
	for _, r := range e.faults(t) {
		assert.NotEqual(t, gpuEntity(1), r.Entity, "a cleared incident opened %s", r.Type)
	}
}
