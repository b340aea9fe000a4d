package dcgmreceiver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/interval"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

const (
	fieldFanSpeed  model.FieldID = 191  // DCGM_FI_DEV_FAN_SPEED, outside the catalogue
	fieldBAR1Used  model.FieldID = 92   // DCGM_FI_DEV_BAR1_USED
	fieldIntActive model.FieldID = 1016 // DCGM_FI_PROF_PIPE_INT_ACTIVE
)

// collectorsSnapshot has values of listed and unlisted fields: the source
// is asked only for the listed ones, and only those are reported.
func collectorsSnapshot(at time.Time) model.Snapshot {
	return snapshot(at, intValue(model.FieldGPUTemp, 61), intValue(model.FieldSMClock, 1980), intValue(model.FieldPowerUsage, 512),
		intValue(fieldFanSpeed, 43), intValue(fieldBAR1Used, 12), floatValue(fieldIntActive, 0.25))
}

func TestCollectorsCSVUnderDCGMExporterNaming(t *testing.T) {
	src := &fakeSource{snaps: []model.Snapshot{collectorsSnapshot(time.Unix(1_790_000_000, 0))}}
	cfg := fastConfig()
	cfg.Naming = NamingDCGMExporter
	cfg.CollectionInterval, cfg.ProfilingInterval = interval.Floor, interval.Floor // validated below
	cfg.Collectors = filepath.Join("testdata", "collectors", "custom.csv")
	require.NoError(t, confmap.Validate(cfg))
	env := newTestEnv(t, cfg, src)
	assert.Equal(t, []model.FieldID{fieldBAR1Used, model.FieldSMClock, model.FieldGPUTemp, fieldFanSpeed}, sorted(env.r.metrics.fields.device))
	assert.Equal(t, []model.FieldID{fieldIntActive}, env.r.metrics.fields.profiling)
	env.start(t)

	type seen struct {
		typ  pmetric.MetricType
		help string
	}
	got := map[string]seen{}
	require.Eventually(t, func() bool {
		for _, md := range env.metrics.AllMetrics() {
			rm := md.ResourceMetrics().At(0)
			_, hasDriver := rm.Resource().Attributes().Get("DCGM_FI_DRIVER_VERSION")
			assert.False(t, hasDriver, "the CSV does not list DCGM_FI_DRIVER_VERSION as a label")
			ms := rm.ScopeMetrics().At(0).Metrics()
			for i := 0; i < ms.Len(); i++ {
				got[ms.At(i).Name()] = seen{ms.At(i).Type(), ms.At(i).Description()}
			}
		}
		_, prof := got["DCGM_FI_PROF_PIPE_INT_ACTIVE"]
		return prof && len(got) >= 5
	}, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, map[string]seen{
		"DCGM_FI_DEV_GPU_TEMP":         {pmetric.MetricTypeGauge, "Temperature of the GPU (C)."},
		"DCGM_FI_DEV_SM_CLOCK":         {pmetric.MetricTypeSum, "SM clock listed as a counter."},
		"DCGM_FI_DEV_FAN_SPEED":        {pmetric.MetricTypeGauge, "Fan speed (in 0-100%)."},
		"DCGM_FI_DEV_BAR1_USED":        {pmetric.MetricTypeGauge, "Used BAR1 (in MiB)."},
		"DCGM_FI_PROF_PIPE_INT_ACTIVE": {pmetric.MetricTypeGauge, "Ratio of cycles the integer pipe is active."},
		"DCGM_EXP_GPU_UNRESPONSIVE":    {pmetric.MetricTypeGauge, "1 while a driver call for the GPU does not return within call_timeout."},
	}, got, "the CSV's fields, types and help texts; DCGM_FI_DEV_POWER_USAGE is not listed")
}

func TestCollectorsCSVUnderOTelNaming(t *testing.T) {
	src := &fakeSource{snaps: []model.Snapshot{collectorsSnapshot(time.Unix(1_790_000_000, 0))}}
	cfg := fastConfig()
	cfg.Collectors = filepath.Join("testdata", "collectors", "custom.csv")
	env := newTestEnv(t, cfg, src)
	env.start(t)
	require.Eventually(t, func() bool { return len(env.metrics.AllMetrics()) > 0 }, 10*time.Second, 5*time.Millisecond)
	md := env.metrics.AllMetrics()[0]
	dp, ok := findPoint(md, "gpu.dcgm.dev_fan_speed", nil)
	require.True(t, ok, "a field outside the catalogue keeps its DCGM name in gpu.dcgm")
	assert.Equal(t, int64(43), dp.IntValue())
	_, ok = findPoint(md, "hw.temperature", map[string]string{"hw.sensor_location": "gpu"})
	assert.True(t, ok, "a catalogued field keeps its semantic-convention metric")
	_, ok = findPoint(md, "hw.power", nil)
	assert.False(t, ok, "DCGM_FI_DEV_POWER_USAGE is not in the CSV")
	res := md.ResourceMetrics().At(0).Resource().Attributes()
	v, _ := res.Get("gpu.driver.version")
	assert.Equal(t, testGPU.DriverVersion, v.Str(), "otel naming keeps the driver version on the resource")
}

func TestCollectorsCSVErrorsNameFileLineColumn(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Collectors = filepath.Join("testdata", "collectors", "bad.csv")
	err := confmap.Validate(cfg)
	require.Error(t, err)
	assert.ErrorContains(t, err, `collectors: testdata/collectors/bad.csv:2:1: "DCGM_FI_DEV_FAN_SPEEED" is not a DCGM field name`)

	cfg.Collectors = filepath.Join(t.TempDir(), "missing.csv")
	assert.ErrorContains(t, confmap.Validate(cfg), "missing.csv: no such file")
}

func sorted(ids []model.FieldID) []model.FieldID {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// dcgm-exporter reports the count of each XID only when its CSV lists
// DCGM_EXP_XID_ERRORS_COUNT; so does the receiver given a CSV.
func TestCollectorsCSVChoosesTheXIDCount(t *testing.T) {
	with := filepath.Join(t.TempDir(), "with-xid.csv")
	require.NoError(t, os.WriteFile(with, []byte("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_EXP_XID_ERRORS_COUNT, gauge, Count of XID errors.\n"), 0o600))
	xids := map[string]map[int]int64{testGPU.UUID: {79: 1}}
	for path, want := range map[string]bool{
		"": true, // the catalogue: every series the receiver has
		filepath.Join("testdata", "collectors", "custom.csv"): false,
		with: true,
	} {
		fs, err := newFieldSet(path, NamingDCGMExporter)
		require.NoError(t, err)
		b := newMetricsBuilder(NamingDCGMExporter, "xl003", "test", pcommon.NewTimestampFromTime(time.Unix(1_789_000_000, 0)))
		b.fields = fs
		md := b.build(snapshot(time.Unix(1_790_000_000, 0), intValue(model.FieldGPUTemp, 61)), func(model.GPUSample) model.Owner { return model.Owner{} }, xids)
		_, got := findPoint(md, "DCGM_EXP_XID_ERRORS_COUNT", map[string]string{"xid": "79"})
		assert.Equal(t, want, got, "collectors %q", path)
	}
}
