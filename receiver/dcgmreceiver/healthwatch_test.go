package dcgmreceiver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/dcgmsrc"
)

// The GPUs of the fake DCGM the health tests drive the receiver through.
var healthGPUs = []dcgmsrc.FakeGPU{
	{UUID: "GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc40", Model: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:18:00.0", DriverVersion: "570.86.15"},
	{UUID: "GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc41", Model: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:2A:00.0", DriverVersion: "570.86.15"},
}

// healthEnv is the real receiver, built by its factory, with source dcgm
// over the fake DCGM (dcgmsrc.FakeDCGM): the path a node's health incidents
// take, the hardware aside.
type healthEnv struct {
	r    *dcgmReceiver
	fake *dcgmsrc.FakeDCGM
	obs  *observer.ObservedLogs
}

func newHealthEnv(t *testing.T, logs consumer.Logs, metrics consumer.Metrics, switches ...uint) *healthEnv {
	t.Helper()
	ctx := context.Background()
	fake := dcgmsrc.NewFakeDCGM(dcgmsrc.NewFakeHealth(switches, false), healthGPUs...)
	f := &factory{shared: sharedcomponent.NewMap[*Config, *dcgmReceiver](), conns: dcgmsrc.NewFakeConnections(fake, time.Now)}
	cfg := createDefaultConfig().(*Config)
	cfg.HostName = "xl003"
	cfg.Mode = ModeEmbedded
	core, obs := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	var comp any
	if logs != nil {
		c, err := f.createLogs(ctx, set, cfg, logs)
		require.NoError(t, err)
		comp = c
	}
	if metrics != nil {
		c, err := f.createMetrics(ctx, set, cfg, metrics)
		require.NoError(t, err)
		comp = c
	}
	r := comp.(*sharedcomponent.Component[*Config, *dcgmReceiver]).Inner
	// The collection loop's steps are driven by check, not by its ticker.
	require.NoError(t, r.deps.metricsSource.Start(ctx, nil))
	t.Cleanup(func() { require.NoError(t, r.Shutdown(context.Background())) })
	return &healthEnv{r: r, fake: fake, obs: obs}
}

// check is one step of the collection loop: the device fields, then the
// health watches.
func (e *healthEnv) check(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.r.collect(ctx, e.r.metrics.fields.device))
	e.r.checkHealth(ctx)
}

func logRecords(ld []plog.Logs) []plog.LogRecord {
	var out []plog.LogRecord
	for _, l := range ld {
		for _, rl := range l.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, lr := range sl.LogRecords().All() {
					out = append(out, lr)
				}
			}
		}
	}
	return out
}

func healthRecords(ld []plog.Logs) []plog.LogRecord {
	var out []plog.LogRecord
	for _, lr := range logRecords(ld) {
		if lr.EventName() == semconv.EventGPUHealthIncident {
			out = append(out, lr)
		}
	}
	return out
}

func attrStr(lr plog.LogRecord, k string) string {
	v, _ := lr.Attributes().Get(k)
	return v.AsString()
}

var (
	dbeOnGPU1 = dcgmsrc.FakeIncident{GPU: 1, System: semconv.HealthSystemMemory, Result: model.HealthFail, Code: 4,
		Message: "Detected 2 volatile double-bit ECC error(s) in GPU 1."}
	replaysOnGPU0 = dcgmsrc.FakeIncident{GPU: 0, System: semconv.HealthSystemPCIe, Result: model.HealthWarn, Code: 3,
		Message: "Detected more than 8 PCIe replays per minute for GPU 0 : 12 Reconnect PCIe card."}
)

// An incident is one record when it appears and one when it clears,
// however many checks report it; the gauge reports every GPU and system at
// every check.
func TestHealthIncidentsLoggedOncePerChange(t *testing.T) {
	logs, metrics := new(consumertest.LogsSink), new(consumertest.MetricsSink)
	e := newHealthEnv(t, logs, metrics)
	e.check(t) // DCGM's baseline check
	assert.Empty(t, healthRecords(logs.AllLogs()))

	e.fake.SetIncidents(dbeOnGPU1, replaysOnGPU0)
	for range 3 {
		e.check(t)
	}
	recs := healthRecords(logs.AllLogs())
	require.Len(t, recs, 2, "one record per incident, not one per check")
	byCode := map[string]plog.LogRecord{}
	for _, lr := range recs {
		byCode[attrStr(lr, semconv.AttrGPUHealthErrorName)] = lr
	}
	dbe := byCode["DCGM_FR_VOLATILE_DBE_DETECTED"]
	assert.Equal(t, semconv.HealthSystemMemory, attrStr(dbe, semconv.AttrGPUHealthSystem))
	assert.Equal(t, semconv.HealthResultFail, attrStr(dbe, semconv.AttrGPUHealthResult))
	assert.Equal(t, "4", attrStr(dbe, semconv.AttrGPUHealthErrorCode))
	assert.Equal(t, dbeOnGPU1.Message, attrStr(dbe, semconv.AttrGPUHealthErrorMessage))
	assert.Equal(t, plog.SeverityNumberError, dbe.SeverityNumber())
	assert.Equal(t, plog.SeverityNumberWarn, byCode["DCGM_FR_PCI_REPLAY_RATE"].SeverityNumber())

	last := metrics.AllMetrics()[len(metrics.AllMetrics())-1]
	for gpu, want := range map[int]map[string]int64{
		0: {semconv.HealthSystemPCIe: 1, semconv.HealthSystemMemory: 0, semconv.HealthSystemNVLink: 0},
		1: {semconv.HealthSystemPCIe: 0, semconv.HealthSystemMemory: 2, semconv.HealthSystemInforom: 0},
	} {
		for sys, v := range want {
			dp, ok := findHealthPoint(last, healthGPUs[gpu].UUID, sys)
			require.True(t, ok, "GPU %d %s", gpu, sys)
			assert.Equal(t, v, dp.IntValue(), "GPU %d %s", gpu, sys)
		}
	}

	// The DBE clears (a GPU reset); the replays go on.
	logs.Reset()
	e.fake.SetIncidents(replaysOnGPU0)
	e.check(t)
	e.check(t)
	recs = healthRecords(logs.AllLogs())
	require.Len(t, recs, 1, "one record for the incident that cleared")
	assert.Equal(t, semconv.HealthResultPass, attrStr(recs[0], semconv.AttrGPUHealthResult))
	assert.Equal(t, "DCGM_FR_VOLATILE_DBE_DETECTED", attrStr(recs[0], semconv.AttrGPUHealthErrorName))
	assert.Equal(t, plog.SeverityNumberInfo, recs[0].SeverityNumber())
	last = metrics.AllMetrics()[len(metrics.AllMetrics())-1]
	dp, ok := findHealthPoint(last, healthGPUs[1].UUID, semconv.HealthSystemMemory)
	require.True(t, ok)
	assert.Equal(t, int64(0), dp.IntValue())
}

func findHealthPoint(md pmetric.Metrics, uuid, system string) (pmetric.NumberDataPoint, bool) {
	for _, rm := range md.ResourceMetrics().All() {
		if v, ok := rm.Resource().Attributes().Get(semconv.AttrGPUUUID); !ok || v.Str() != uuid {
			continue
		}
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Name() != semconv.MetricGPUHealthStatus {
					continue
				}
				for _, dp := range m.Gauge().DataPoints().All() {
					if v, _ := dp.Attributes().Get(semconv.AttrGPUHealthSystem); v.Str() == system {
						return dp, true
					}
				}
			}
		}
	}
	return pmetric.NumberDataPoint{}, false
}

// A record the logs pipeline refuses is offered again at the next check:
// an incident is never lost to a full queue.
func TestHealthRecordRefusedIsReportedAgain(t *testing.T) {
	logs := &refusingLogs{full: true}
	e := newHealthEnv(t, logs, nil)
	e.check(t)
	e.fake.SetIncidents(dbeOnGPU1)
	e.check(t)
	refused, accepted := logs.snapshot()
	assert.Equal(t, 1, refused)
	assert.Empty(t, healthRecords(accepted))
	logs.setFull(false)
	e.check(t)
	e.check(t)
	_, accepted = logs.snapshot()
	require.Len(t, healthRecords(accepted), 1)
	assert.Equal(t, 1, e.obs.FilterMessageSnippet("DCGM health record refused").Len())
}

// After a reconnect DCGM's first check is a baseline again: it reports
// nothing, which must not read as every incident clearing (and appearing
// again at the next check).
func TestHealthBaselineAfterReconnectClearsNothing(t *testing.T) {
	logs := new(consumertest.LogsSink)
	e := newHealthEnv(t, logs, nil)
	e.check(t)
	e.fake.SetIncidents(dbeOnGPU1)
	e.check(t)
	require.Len(t, healthRecords(logs.AllLogs()), 1)
	// nv-hostengine restarted: the new connection's first check is a
	// baseline (dcgmsrc's tests show the source reports it so).
	e.r.noteHealth(context.Background(), model.HealthReport{Baseline: true})
	assert.Len(t, healthRecords(logs.AllLogs()), 1, "a baseline clears nothing")
	e.r.noteHealth(context.Background(), model.HealthReport{})
	recs := healthRecords(logs.AllLogs())
	require.Len(t, recs, 2, "a real check without the incident clears it")
	assert.Equal(t, semconv.HealthResultPass, attrStr(recs[1], semconv.AttrGPUHealthResult))
}

// NVSwitch incidents are on the node: no GPU on their resource.
func TestHealthNVSwitchIncidentOnTheNode(t *testing.T) {
	logs, metrics := new(consumertest.LogsSink), new(consumertest.MetricsSink)
	e := newHealthEnv(t, logs, metrics, 3)
	e.check(t)
	sw := uint(3)
	e.fake.SetIncidents(dcgmsrc.FakeIncident{NVSwitch: &sw, System: semconv.HealthSystemNVSwitchFatal, Result: model.HealthFail, Code: 15, Message: "Detected fatal errors on NvSwitch 3"})
	e.check(t)
	recs := healthRecords(logs.AllLogs())
	require.Len(t, recs, 1)
	assert.Equal(t, "3", attrStr(recs[0], semconv.AttrGPUHealthNVSwitch))
	res := logs.AllLogs()[len(logs.AllLogs())-1].ResourceLogs().At(0).Resource().Attributes()
	_, hasGPU := res.Get(semconv.AttrGPUUUID)
	assert.False(t, hasGPU)
	host, _ := res.Get(semconv.AttrHostName)
	assert.Equal(t, "xl003", host.Str())

	var found bool
	for _, rm := range metrics.AllMetrics()[len(metrics.AllMetrics())-1].ResourceMetrics().All() {
		if _, gpu := rm.Resource().Attributes().Get(semconv.AttrGPUUUID); gpu {
			continue
		}
		for _, dp := range rm.ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().All() {
			sys, _ := dp.Attributes().Get(semconv.AttrGPUHealthSystem)
			id, _ := dp.Attributes().Get(semconv.AttrGPUHealthNVSwitch)
			if sys.Str() == semconv.HealthSystemNVSwitchFatal && id.Int() == 3 {
				found = true
				assert.Equal(t, int64(2), dp.IntValue())
			}
		}
	}
	assert.True(t, found, "the NVSwitch's gauge on the node's resource")
}

// Sources without health watches (nvml, exporter) report none: no check,
// no record, no gauge.
func TestHealthNotCheckedWithoutHealthWatches(t *testing.T) {
	env := newTestEnv(t, fastConfig(), &fakeSource{snaps: []model.Snapshot{snapshot(time.Now())}})
	env.r.checkHealth(context.Background())
	assert.Empty(t, env.logs.AllLogs())
	assert.Empty(t, env.metrics.AllMetrics())
}

// The records and the gauge as users see them.
func TestGoldenHealth(t *testing.T) {
	xids, err := newXIDCatalogue(nil)
	require.NoError(t, err)
	lb := &logsBuilder{hostName: "xl003", version: "test", xids: xids}
	gpu := model.GPU{Index: 1, UUID: healthGPUs[1].UUID, Model: healthGPUs[1].Model, PCIBusID: healthGPUs[1].PCIBusID, DriverVersion: healthGPUs[1].DriverVersion}
	owner := model.Owner{SlurmJobID: "4242", TrainingJobID: "llama-70b"}
	dbe := model.HealthIncident{GPU: gpu, System: semconv.HealthSystemMemory, Result: model.HealthFail, Code: 4,
		CodeName: "DCGM_FR_VOLATILE_DBE_DETECTED", Message: dbeOnGPU1.Message}
	nvs := model.HealthIncident{OnNVSwitch: true, NVSwitch: 3, System: semconv.HealthSystemNVSwitchNonFatal, Result: model.HealthWarn, Code: 16,
		CodeName: "DCGM_FR_NVSWITCH_NON_FATAL_ERROR", Message: "Detected nonfatal errors on NvSwitch 3"}
	actualLogs := plog.NewLogs()
	for _, ld := range []plog.Logs{
		lb.healthLogs(dbe, owner, false, goldenTime),
		lb.healthLogs(nvs, model.Owner{}, false, goldenTime),
		lb.healthLogs(dbe, owner, true, goldenTime.Add(time.Minute)),
	} {
		ld.ResourceLogs().MoveAndAppendTo(actualLogs.ResourceLogs())
	}
	b := newMetricsBuilder(NamingOTel, "xl003", "test", 0)
	rep := model.HealthReport{Time: goldenTime, GPUs: []model.GPU{gpu},
		GPUSystems:      []string{semconv.HealthSystemPCIe, semconv.HealthSystemMemory, semconv.HealthSystemInforom, semconv.HealthSystemThermal, semconv.HealthSystemPower, semconv.HealthSystemNVLink},
		NVSwitches:      []uint{3},
		NVSwitchSystems: []string{semconv.HealthSystemNVSwitchFatal, semconv.HealthSystemNVSwitchNonFatal},
		Incidents:       []model.HealthIncident{dbe, nvs}}
	actualMetrics := b.buildHealth(rep, func(model.GPU) model.Owner { return owner })

	logsPath := filepath.Join("testdata", "golden", "health_logs.yaml")
	metricsPath := filepath.Join("testdata", "golden", "health_metrics.yaml")
	if *update {
		require.NoError(t, golden.WriteLogs(t, logsPath, actualLogs))
		require.NoError(t, golden.WriteMetrics(t, metricsPath, actualMetrics))
	}
	expectedLogs, err := golden.ReadLogs(logsPath)
	require.NoError(t, err)
	require.NoError(t, plogtest.CompareLogs(expectedLogs, actualLogs, plogtest.IgnoreResourceLogsOrder()))
	expectedMetrics, err := golden.ReadMetrics(metricsPath)
	require.NoError(t, err)
	require.NoError(t, pmetrictest.CompareMetrics(expectedMetrics, actualMetrics, pmetrictest.IgnoreTimestamp(), pmetrictest.IgnoreResourceMetricsOrder(), pmetrictest.IgnoreMetricDataPointsOrder()))
}
