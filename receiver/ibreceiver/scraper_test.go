package ibreceiver

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const (
	procfsRoot       = "testdata/procfs-sys"
	nodeExporterRoot = "testdata/node_exporter-sys"
	testHost         = "test-host"
)

type testEnv struct {
	s     *ibScraper
	logs  *observer.ObservedLogs
	tel   *componenttest.Telemetry
	clock time.Time
}

func testConfig(root string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.SysfsRoot = root
	cfg.HostName = testHost
	return cfg
}

func newTestEnv(tb testing.TB, cfg *Config) *testEnv {
	tb.Helper()
	core, logs := observer.New(zap.DebugLevel)
	tel := componenttest.NewTelemetry()
	tb.Cleanup(func() { require.NoError(tb, tel.Shutdown(context.Background())) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	s, err := newScraper(cfg, set)
	require.NoError(tb, err)
	e := &testEnv{s: s, logs: logs, tel: tel, clock: time.Unix(1_700_000_000, 0)}
	s.now = func() time.Time { return e.clock }
	require.NoError(tb, s.start(context.Background(), componenttest.NewNopHost()))
	tb.Cleanup(func() { require.NoError(tb, s.shutdown(context.Background())) })
	return e
}

func (e *testEnv) scrape(tb testing.TB) pmetric.Metrics {
	tb.Helper()
	e.clock = e.clock.Add(10 * time.Second)
	md, err := e.s.scrape(context.Background())
	require.NoError(tb, err)
	return md
}

func (e *testEnv) ts() pcommon.Timestamp { return pcommon.NewTimestampFromTime(e.clock) }

// readErrors returns otelcol_ib_read_errors summed over all attributes, and
// the value for one counter file (relative path) of one device.
func (e *testEnv) readErrors(tb testing.TB, device, rel string) (total, one int64) {
	tb.Helper()
	m, err := e.tel.GetMetric("otelcol_ib_read_errors")
	if err != nil {
		return 0, 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(tb, ok)
	assert.True(tb, sum.IsMonotonic)
	for _, dp := range sum.DataPoints {
		total += dp.Value
		d, _ := dp.Attributes.Value(metadata.TelemetryAttrDevice)
		c, _ := dp.Attributes.Value(metadata.TelemetryAttrCounter)
		if d.AsString() == device && c.AsString() == rel {
			one = dp.Value
		}
	}
	return total, one
}

func (e *testEnv) countLogs(substr string) int {
	n := 0
	for _, l := range e.logs.All() {
		if strings.Contains(l.Message, substr) {
			n++
		}
	}
	return n
}

func copyTree(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "sys")
	require.NoError(tb, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	require.NoError(tb, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(tb, os.WriteFile(path, []byte(content), 0o644))
}

// findPoint returns the data point of metric on device whose attributes
// contain attrs.
func findPoint(md pmetric.Metrics, device, metric string, attrs map[string]string) (pmetric.NumberDataPoint, bool) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		d, _ := rm.Resource().Attributes().Get(semconv.AttrIBDevice)
		if d.Str() != device {
			continue
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() != metric {
					continue
				}
				var dps pmetric.NumberDataPointSlice
				if m.Type() == pmetric.MetricTypeSum {
					dps = m.Sum().DataPoints()
				} else {
					dps = m.Gauge().DataPoints()
				}
			points:
				for l := 0; l < dps.Len(); l++ {
					dp := dps.At(l)
					for key, want := range attrs {
						v, ok := dp.Attributes().Get(key)
						if !ok || v.Str() != want {
							continue points
						}
					}
					return dp, true
				}
			}
		}
	}
	return pmetric.NumberDataPoint{}, false
}

func devices(md pmetric.Metrics) []string {
	var out []string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		d, _ := md.ResourceMetrics().At(i).Resource().Attributes().Get(semconv.AttrIBDevice)
		out = append(out, d.Str())
	}
	return out
}

func TestScrapeGolden(t *testing.T) {
	tests := []struct {
		name       string
		root       string
		hwCounters []string
	}{
		{name: "procfs", root: procfsRoot},
		{name: "procfs_all_hw_counters", root: procfsRoot, hwCounters: []string{AllHWCounters}},
		{name: "node_exporter", root: nodeExporterRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(tt.root)
			if tt.hwCounters != nil {
				cfg.HWCounters = tt.hwCounters
			}
			e := newTestEnv(t, cfg)
			actual := e.scrape(t)
			path := filepath.Join("testdata", "golden", tt.name+".yaml")
			if *update {
				require.NoError(t, golden.WriteMetrics(t, path, actual))
			}
			expected, err := golden.ReadMetrics(path)
			require.NoError(t, err)
			require.NoError(t, pmetrictest.CompareMetrics(expected, actual,
				pmetrictest.IgnoreTimestamp(),
				pmetrictest.IgnoreStartTimestamp(),
				pmetrictest.IgnoreResourceMetricsOrder(),
				pmetrictest.IgnoreMetricsOrder(),
				pmetrictest.IgnoreMetricDataPointsOrder(),
			))
		})
	}
}

func TestScrapeValues(t *testing.T) {
	e := newTestEnv(t, testConfig(procfsRoot))
	md := e.scrape(t)
	assert.Equal(t, []string{"hfi1_0", "mlx4_0", "mlx5_0"}, devices(md))

	rm := md.ResourceMetrics().At(2)
	host, _ := rm.Resource().Attributes().Get(semconv.AttrHostName)
	assert.Equal(t, testHost, host.Str())
	assert.Equal(t, metadata.ScopeName, rm.ScopeMetrics().At(0).Scope().Name())

	port1 := map[string]string{semconv.AttrIBPort: "1"}
	tx := map[string]string{semconv.AttrIBPort: "1", semconv.AttrNetworkIODirection: semconv.DirectionTransmit}
	dp, ok := findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, tx)
	require.True(t, ok)
	assert.Equal(t, int64(2880761508848*4), dp.IntValue())
	assert.Equal(t, pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0)), dp.StartTimestamp(), "first start time is the receiver start")
	assert.Equal(t, e.ts(), dp.Timestamp())

	dp, ok = findPoint(md, "mlx5_0", semconv.MetricIBPortRate, port1)
	require.True(t, ok)
	assert.Equal(t, int64(3125000000), dp.IntValue())
	dp, ok = findPoint(md, "hfi1_0", semconv.MetricIBPortRate, map[string]string{semconv.AttrIBLinkLayer: "InfiniBand"})
	require.True(t, ok)
	assert.Equal(t, int64(12500000000), dp.IntValue())

	dp, ok = findPoint(md, "mlx5_0", semconv.MetricIBPortHWCounter, map[string]string{semconv.AttrIBHWCounter: "req_cqe_error"})
	require.True(t, ok)
	assert.Equal(t, int64(3481), dp.IntValue())
	_, ok = findPoint(md, "mlx5_0", semconv.MetricIBPortHWCounter, map[string]string{semconv.AttrIBHWCounter: "rx_read_requests"})
	assert.False(t, ok, "not in the default allow-list")

	dp, ok = findPoint(md, "mlx4_0", semconv.MetricIBPortXmitWait, map[string]string{semconv.AttrIBPort: "2"})
	require.True(t, ok)
	assert.Equal(t, int64(3846), dp.IntValue())

	dp, ok = findPoint(md, "mlx5_0", semconv.MetricIBPortPhysState, port1)
	require.True(t, ok)
	assert.Equal(t, int64(4), dp.IntValue())
	v, _ := dp.Attributes().Get(semconv.AttrIBPhysState)
	assert.Equal(t, "ACTIVE", v.Str())

	dp, ok = findPoint(md, "hfi1_0", semconv.MetricIBDeviceInfo, nil)
	require.True(t, ok)
	assert.Equal(t, int64(1), dp.IntValue())
	_, hasHCA := dp.Attributes().Get(semconv.AttrIBHCAType)
	assert.False(t, hasHCA, "hfi1_0 has no hca_type file")
	fw, _ := dp.Attributes().Get(semconv.AttrIBFWVer)
	assert.Equal(t, "1.27.0", fw.Str())

	total, _ := e.readErrors(t, "", "")
	assert.Zero(t, total)
	assert.Zero(t, e.logs.FilterLevelExact(zap.WarnLevel).Len())
}

func TestScrapeCountersExt(t *testing.T) {
	e := newTestEnv(t, testConfig(nodeExporterRoot))
	md := e.scrape(t)
	get := func(port, metric, dir string) int64 {
		dp, ok := findPoint(md, "mlx4_0", metric, map[string]string{semconv.AttrIBPort: port, semconv.AttrNetworkIODirection: dir})
		require.True(t, ok, "%s %s %s", port, metric, dir)
		return dp.IntValue()
	}
	assert.Equal(t, int64(3733440*4), get("1", semconv.MetricHWNetworkIO, semconv.DirectionTransmit))
	assert.Equal(t, int64(4631917*4), get("1", semconv.MetricHWNetworkIO, semconv.DirectionReceive))
	// counters_ext/port_xmit_packets_64 exists and parses (0): it wins over counters/ (6235865).
	assert.Equal(t, int64(0), get("1", semconv.MetricHWNetworkPackets, semconv.DirectionTransmit))
	// Port 2: counters/port_xmit_data is 0, the 64-bit one 3733440 words.
	assert.Equal(t, int64(3733440*4), get("2", semconv.MetricHWNetworkIO, semconv.DirectionTransmit))
	assert.Equal(t, int64(0), get("2", semconv.MetricHWNetworkPackets, semconv.DirectionReceive))
	dp, ok := findPoint(md, "mlx4_0", semconv.MetricIBPortXmitWait, map[string]string{semconv.AttrIBPort: "1"})
	require.True(t, ok)
	assert.Equal(t, int64(4294967295), dp.IntValue())

	// An unparsable 64-bit file falls back to the 32-bit counter, and is reported.
	root := copyTree(t, nodeExporterRoot)
	writeFile(t, filepath.Join(root, "class/infiniband/mlx4_0/ports/1/counters_ext/port_xmit_packets_64"), "garbage\n")
	e = newTestEnv(t, testConfig(root))
	md = e.scrape(t)
	dp, ok = findPoint(md, "mlx4_0", semconv.MetricHWNetworkPackets, map[string]string{semconv.AttrIBPort: "1", semconv.AttrNetworkIODirection: semconv.DirectionTransmit})
	require.True(t, ok)
	assert.Equal(t, int64(6235865), dp.IntValue())
	_, one := e.readErrors(t, "mlx4_0", "ports/1/counters_ext/port_xmit_packets_64")
	assert.Equal(t, int64(1), one)
}

func TestScrapeNotAvailable(t *testing.T) {
	e := newTestEnv(t, testConfig(nodeExporterRoot))
	const scrapes = 3
	var md pmetric.Metrics
	for range scrapes {
		md = e.scrape(t)
	}
	// 17 counters of i40iw0 read "N/A (no PMA)": logged once each, counted every scrape.
	assert.Equal(t, 17, e.countLogs("value not available"))
	assert.Zero(t, e.countLogs("cannot read value"))
	total, one := e.readErrors(t, "i40iw0", "ports/1/counters/symbol_error")
	assert.Equal(t, int64(17*scrapes), total)
	assert.Equal(t, int64(scrapes), one)

	// Skipped: no counter metrics for i40iw0, but state, rate and info remain.
	for _, m := range []string{semconv.MetricHWNetworkIO, semconv.MetricHWNetworkPackets, semconv.MetricHWErrors, semconv.MetricIBPortXmitWait} {
		_, ok := findPoint(md, "i40iw0", m, nil)
		assert.False(t, ok, m)
	}
	for _, m := range []string{semconv.MetricIBPortState, semconv.MetricIBPortPhysState, semconv.MetricIBPortRate, semconv.MetricIBDeviceInfo} {
		_, ok := findPoint(md, "i40iw0", m, nil)
		assert.True(t, ok, m)
	}
}

func TestScrapeResetAndIncrease(t *testing.T) {
	root := copyTree(t, procfsRoot)
	counters := filepath.Join(root, "class/infiniband/mlx5_0/ports/1/counters")
	hw := filepath.Join(root, "class/infiniband/mlx5_0/ports/1/hw_counters")
	e := newTestEnv(t, testConfig(root))
	tx := map[string]string{semconv.AttrNetworkIODirection: semconv.DirectionTransmit}
	seqErr := map[string]string{semconv.AttrIBHWCounter: "packet_seq_err"}
	receiverStart := pcommon.NewTimestampFromTime(e.clock)

	md := e.scrape(t)
	dp, ok := findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, tx)
	require.True(t, ok)
	assert.Equal(t, receiverStart, dp.StartTimestamp())

	// Increase: same start time, new value.
	writeFile(t, filepath.Join(counters, "port_xmit_data"), "2880761509848\n")
	writeFile(t, filepath.Join(hw, "packet_seq_err"), "5\n")
	md = e.scrape(t)
	secondScrape := e.ts()
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, tx)
	require.True(t, ok)
	assert.Equal(t, receiverStart, dp.StartTimestamp())
	assert.Equal(t, int64(2880761509848*4), dp.IntValue())
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricIBPortHWCounter, seqErr)
	require.True(t, ok)
	assert.Equal(t, receiverStart, dp.StartTimestamp())
	assert.Equal(t, int64(5), dp.IntValue())

	// Decrease (wrap / reset): start moves to the previous scrape, the value is the new one.
	writeFile(t, filepath.Join(counters, "port_xmit_data"), "100\n")
	writeFile(t, filepath.Join(hw, "packet_seq_err"), "0\n")
	md = e.scrape(t)
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, tx)
	require.True(t, ok)
	assert.Equal(t, secondScrape, dp.StartTimestamp())
	assert.Equal(t, e.ts(), dp.Timestamp())
	assert.Equal(t, int64(400), dp.IntValue())
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricIBPortHWCounter, seqErr)
	require.True(t, ok)
	assert.Equal(t, secondScrape, dp.StartTimestamp())
	assert.Equal(t, int64(0), dp.IntValue())
	// Untouched series keep the receiver start.
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, map[string]string{semconv.AttrNetworkIODirection: semconv.DirectionReceive})
	require.True(t, ok)
	assert.Equal(t, receiverStart, dp.StartTimestamp())

	// Growing again after the reset keeps the new start time.
	writeFile(t, filepath.Join(counters, "port_xmit_data"), "150\n")
	md = e.scrape(t)
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, tx)
	require.True(t, ok)
	assert.Equal(t, secondScrape, dp.StartTimestamp())
	assert.Equal(t, int64(600), dp.IntValue())
}

func TestScrapeSaturatesAtMaxInt64(t *testing.T) {
	root := copyTree(t, procfsRoot)
	counters := filepath.Join(root, "class/infiniband/mlx5_0/ports/1/counters")
	writeFile(t, filepath.Join(counters, "port_xmit_data"), "18446744073709551615\n")
	writeFile(t, filepath.Join(counters, "port_xmit_packets"), "9223372036854775808\n")
	e := newTestEnv(t, testConfig(root))
	md := e.scrape(t)
	tx := map[string]string{semconv.AttrNetworkIODirection: semconv.DirectionTransmit}
	dp, ok := findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, tx)
	require.True(t, ok)
	assert.Equal(t, int64(math.MaxInt64), dp.IntValue())
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricHWNetworkPackets, tx)
	require.True(t, ok)
	assert.Equal(t, int64(math.MaxInt64), dp.IntValue())
}

func TestScrapeDevicesAppearAndDisappear(t *testing.T) {
	root := copyTree(t, procfsRoot)
	class := filepath.Join(root, "class/infiniband")
	require.NoError(t, os.RemoveAll(filepath.Join(class, "hfi1_0")))
	require.NoError(t, os.RemoveAll(filepath.Join(class, "mlx4_0")))
	e := newTestEnv(t, testConfig(root))
	md := e.scrape(t)
	assert.Equal(t, []string{"mlx5_0"}, devices(md))
	first := e.ts()

	// A device appears: its series start at the previous scrape.
	require.NoError(t, os.CopyFS(filepath.Join(class, "mlx5_1"), os.DirFS(filepath.Join(class, "mlx5_0"))))
	md = e.scrape(t)
	assert.Equal(t, []string{"mlx5_0", "mlx5_1"}, devices(md))
	dp, ok := findPoint(md, "mlx5_1", semconv.MetricHWNetworkIO, nil)
	require.True(t, ok)
	assert.Equal(t, first, dp.StartTimestamp())
	second := e.ts()

	// A device disappears: no output, state dropped.
	require.NoError(t, os.RemoveAll(filepath.Join(class, "mlx5_0")))
	md = e.scrape(t)
	assert.Equal(t, []string{"mlx5_1"}, devices(md))
	assert.NotContains(t, e.s.devices, "mlx5_0")
	third := e.ts()

	// It comes back: treated as new, not continued from its old state.
	require.NoError(t, os.CopyFS(filepath.Join(class, "mlx5_0"), os.DirFS(filepath.Join(class, "mlx5_1"))))
	md = e.scrape(t)
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, nil)
	require.True(t, ok)
	assert.Equal(t, third, dp.StartTimestamp())
	dp, ok = findPoint(md, "mlx5_1", semconv.MetricHWNetworkIO, nil)
	require.True(t, ok)
	assert.Equal(t, first, dp.StartTimestamp(), "mlx5_1 kept its start (appeared after scrape 1)")
	assert.NotEqual(t, second, dp.StartTimestamp())

	// A port disappears: its series are dropped.
	require.NoError(t, os.RemoveAll(filepath.Join(class, "mlx5_1/ports/1")))
	md = e.scrape(t)
	_, ok = findPoint(md, "mlx5_1", semconv.MetricHWNetworkIO, nil)
	assert.False(t, ok)
	assert.Empty(t, e.s.devices["mlx5_1"].series)
	_, ok = findPoint(md, "mlx5_1", semconv.MetricIBDeviceInfo, nil)
	assert.True(t, ok)
}

func TestScrapeIncludeExclude(t *testing.T) {
	cfg := testConfig(procfsRoot)
	cfg.Devices.Include = []string{"mlx5_0", "hfi1_0", "absent"}
	md := newTestEnv(t, cfg).scrape(t)
	assert.Equal(t, []string{"hfi1_0", "mlx5_0"}, devices(md))

	cfg = testConfig(procfsRoot)
	cfg.Devices.Exclude = []string{"mlx4_0"}
	md = newTestEnv(t, cfg).scrape(t)
	assert.Equal(t, []string{"hfi1_0", "mlx5_0"}, devices(md))

	cfg = testConfig(procfsRoot)
	cfg.Devices.Include = []string{"mlx5_0", "hfi1_0"}
	cfg.Devices.Exclude = []string{"hfi1_0"}
	md = newTestEnv(t, cfg).scrape(t)
	assert.Equal(t, []string{"mlx5_0"}, devices(md))
}

func TestScrapeGarbage(t *testing.T) {
	root := copyTree(t, procfsRoot)
	port := filepath.Join(root, "class/infiniband/mlx5_0/ports/1")
	bad := map[string]string{
		"counters/port_xmit_data":   "",             // empty
		"counters/port_rcv_data":    "12ab\n",       // garbage
		"counters/symbol_error":     "N/A (no",      // partial write
		"counters/link_downed":      "-1\n",         // negative
		"hw_counters/out_of_buffer": "\x00\x00\x00", // zeros
		"state":                     "ACTIVE\n",     // no code
		"phys_state":                "5:",           // no text
		"rate":                      "fast\n",       // no number
		"counters/port_xmit_wait":   "99999999999999999999999\n",
	}
	for rel, content := range bad {
		writeFile(t, filepath.Join(port, rel), content)
	}
	writeFile(t, filepath.Join(root, "class/infiniband/mlx5_0/ports/2"), "a file, not a port directory")

	e := newTestEnv(t, testConfig(root))
	var md pmetric.Metrics
	require.NotPanics(t, func() {
		md = e.scrape(t)
		md = e.scrape(t)
	})
	total, one := e.readErrors(t, "mlx5_0", "ports/1/counters/port_rcv_data")
	assert.Equal(t, int64(2), one)
	// 9 bad files, counted on each of 2 scrapes; the stray file ports/2 is
	// not a port directory and is ignored.
	assert.Equal(t, int64(2*len(bad)), total)
	assert.Equal(t, len(bad)-1, e.countLogs("cannot read value"))
	assert.Equal(t, 1, e.countLogs("value not available"), "the truncated N/A")

	tx := map[string]string{semconv.AttrIBPort: "1", semconv.AttrNetworkIODirection: semconv.DirectionTransmit}
	_, ok := findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, tx)
	assert.False(t, ok)
	_, ok = findPoint(md, "mlx5_0", semconv.MetricIBPortState, nil)
	assert.False(t, ok)
	_, ok = findPoint(md, "mlx5_0", semconv.MetricHWErrors, map[string]string{semconv.AttrErrorType: "symbol_error"})
	assert.False(t, ok)
	// Other counters of the same port are still there.
	dp, ok := findPoint(md, "mlx5_0", semconv.MetricHWNetworkPackets, tx)
	require.True(t, ok)
	assert.Equal(t, int64(10907922116), dp.IntValue())
	// The other devices are unaffected.
	assert.Equal(t, []string{"hfi1_0", "mlx4_0", "mlx5_0"}, devices(md))

	// Repaired: the value comes back, a recovery is logged, and a later failure is logged again.
	writeFile(t, filepath.Join(port, "counters/port_xmit_data"), "7\n")
	md = e.scrape(t)
	dp, ok = findPoint(md, "mlx5_0", semconv.MetricHWNetworkIO, tx)
	require.True(t, ok)
	assert.Equal(t, int64(28), dp.IntValue())
	assert.Equal(t, e.ts()-pcommon.Timestamp(10*time.Second), dp.StartTimestamp())
	assert.Equal(t, 1, e.countLogs("readable again"))
	writeFile(t, filepath.Join(port, "counters/port_xmit_data"), "x\n")
	e.scrape(t)
	assert.Equal(t, len(bad), e.countLogs("cannot read value"))
}

func TestScrapeMissingClassDir(t *testing.T) {
	root := t.TempDir()
	e := newTestEnv(t, testConfig(root))
	for range 3 {
		md := e.scrape(t)
		assert.Zero(t, md.ResourceMetrics().Len())
	}
	assert.Equal(t, 1, e.countLogs("class directory does not exist"))

	// Devices show up later (driver loaded).
	require.NoError(t, os.CopyFS(filepath.Join(root, "class/infiniband/mlx5_0"), os.DirFS(filepath.Join(procfsRoot, "class/infiniband/mlx5_0"))))
	md := e.scrape(t)
	assert.Equal(t, []string{"mlx5_0"}, devices(md))

	// And go away again: logged again.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "class")))
	md = e.scrape(t)
	assert.Zero(t, md.ResourceMetrics().Len())
	assert.Empty(t, e.s.devices)
	assert.Equal(t, 2, e.countLogs("class directory does not exist"))
}

func TestScrapeClassDirUnreadable(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "class/infiniband"), "not a directory")
	e := newTestEnv(t, testConfig(root))
	_, err := e.s.scrape(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ibreceiver: reading "+filepath.Join(root, "class/infiniband"))
}

func TestScrapeContextCancelled(t *testing.T) {
	e := newTestEnv(t, testConfig(procfsRoot))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	md, err := e.s.scrape(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, md.ResourceMetrics().Len())
}

func TestScrapeHostNameDefault(t *testing.T) {
	cfg := testConfig(procfsRoot)
	cfg.HostName = ""
	e := newTestEnv(t, cfg)
	want, err := os.Hostname()
	require.NoError(t, err)
	md := e.scrape(t)
	v, ok := md.ResourceMetrics().At(0).Resource().Attributes().Get(semconv.AttrHostName)
	require.True(t, ok)
	assert.Equal(t, want, v.Str())
}

// BenchmarkScrape8Devices scrapes 8 copies of the procfs mlx5_0 device with
// every hw_counter enabled.
func BenchmarkScrape8Devices(b *testing.B) {
	root := b.TempDir()
	src := filepath.Join(procfsRoot, "class/infiniband/mlx5_0")
	for i := range 8 {
		require.NoError(b, os.CopyFS(filepath.Join(root, "class/infiniband", fmt.Sprintf("mlx5_%d", i)), os.DirFS(src)))
	}
	cfg := testConfig(root)
	cfg.HWCounters = []string{AllHWCounters}
	e := newTestEnv(b, cfg)
	md := e.scrape(b)
	require.Equal(b, 8, md.ResourceMetrics().Len())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.s.scrape(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
