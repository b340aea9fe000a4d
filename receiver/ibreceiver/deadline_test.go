//go:build unix

package ibreceiver

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"
)

// hungRoot is a sysfs root with two copies of the procfs mlx5_0 device,
// where mlx5_1's hw_counters/out_of_sequence is a FIFO nobody writes:
// opening it blocks like a hung driver read. It returns the FIFO's path.
func hungRoot(t *testing.T) (root, fifo string) {
	t.Helper()
	root = t.TempDir()
	src := filepath.Join(procfsRoot, "class/infiniband/mlx5_0")
	for _, name := range []string{"mlx5_0", "mlx5_1"} {
		require.NoError(t, os.CopyFS(filepath.Join(root, "class/infiniband", name), os.DirFS(src)))
	}
	fifo = filepath.Join(root, "class/infiniband/mlx5_1/ports/1/hw_counters/out_of_sequence")
	require.NoError(t, os.Remove(fifo))
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	return root, fifo
}

// deadlineWhenRead makes the scrape's deadline fire once the reads of the
// devices (started in this scrape) have finished, and, when blocked is set,
// the read of device hung is blocked in it, so that the test does not
// depend on how fast the machine is; it records the timeout asked for.
func deadlineWhenRead(e *testEnv, asked *[]time.Duration, hung, blocked string, devices ...string) {
	e.s.newTimer = func(d time.Duration) (<-chan time.Time, func() bool) {
		*asked = append(*asked, d)
		var dones []chan struct{}
		for _, name := range devices {
			if ds := e.s.devices[name]; ds != nil && ds.read != nil {
				dones = append(dones, ds.read.done)
			}
		}
		var reader *sysfs.Reader
		if ds := e.s.devices[hung]; ds != nil && blocked != "" {
			reader = ds.reader
		}
		c := make(chan time.Time)
		go func() {
			for _, done := range dones {
				<-done
			}
			for reader != nil && reader.Current() != blocked {
				time.Sleep(time.Millisecond) // the read is on its way to the FIFO
			}
			close(c)
		}()
		return c, func() bool { return true }
	}
}

// skipped returns otelcol_ib_devices_skipped for one device and reason.
func (e *testEnv) skipped(t *testing.T, device, reason string) int64 {
	t.Helper()
	m, err := e.tel.GetMetric("otelcol_ib_devices_skipped")
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	var n int64
	for _, dp := range sum.DataPoints {
		d, _ := dp.Attributes.Value(metadata.TelemetryAttrDevice)
		r, _ := dp.Attributes.Value(metadata.TelemetryAttrReason)
		if d.AsString() == device && r.AsString() == reason {
			n += dp.Value
		}
	}
	return n
}

func deviceNames(md pmetric.Metrics) []string {
	var out []string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		d, _ := md.ResourceMetrics().At(i).Resource().Attributes().Get(semconv.AttrIBDevice)
		out = append(out, d.Str())
	}
	return out
}

// A hung sysfs read (a FIFO nobody writes) skips its device for the scrape
// and every scrape until it returns, counted with the device and reason and
// logged once naming the file; the other device is emitted every time; the
// blocked read is not started a second time; once it returns, the device
// is read again.
func TestScrapeHungReadSkipsTheDevice(t *testing.T) {
	root, fifo := hungRoot(t)
	cfg := testConfig(root)
	cfg.ReadTimeout = 3 * time.Second
	e := newTestEnv(t, cfg)
	var asked []time.Duration
	deadlineWhenRead(e, &asked, "mlx5_1", fifo, "mlx5_0")

	md := e.scrape(t)
	assert.Equal(t, []string{"mlx5_0"}, deviceNames(md))
	_, ok := findPoint(md, "mlx5_0", semconv.MetricIBPortHWCounter, map[string]string{semconv.AttrIBHWCounter: "out_of_sequence"})
	assert.True(t, ok, "the healthy device's hw_counters")
	assert.Equal(t, []time.Duration{3 * time.Second}, asked, "the deadline is read_timeout")
	assert.Equal(t, int64(1), e.skipped(t, "mlx5_1", metadata.ReasonReadTimeout))
	assert.Zero(t, e.skipped(t, "mlx5_0", metadata.ReasonReadTimeout))
	warn := e.logs.FilterMessageSnippet("did not finish within read_timeout").All()
	require.Len(t, warn, 1)
	assert.Equal(t, "mlx5_1", warn[0].ContextMap()[semconv.AttrIBDevice])
	assert.Equal(t, fifo, warn[0].ContextMap()["file"], "the log names the file that hangs")

	// Still blocked: skipped again without a second read.
	inFlight := e.s.devices["mlx5_1"].read
	require.NotNil(t, inFlight)
	md = e.scrape(t)
	assert.Equal(t, []string{"mlx5_0"}, deviceNames(md))
	assert.Same(t, inFlight, e.s.devices["mlx5_1"].read, "one read per device at a time")
	assert.Equal(t, int64(1), e.skipped(t, "mlx5_1", metadata.ReasonReadPending))
	assert.Len(t, e.logs.FilterMessageSnippet("did not finish within read_timeout").All(), 1, "logged once while stuck")

	// The read returns (a writer comes and goes); the name is a regular
	// file again: the device is read and emitted.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteString("7\n")
	require.NoError(t, err)
	require.NoError(t, os.Remove(fifo))
	require.NoError(t, os.WriteFile(fifo, []byte("8\n"), 0o644))
	require.NoError(t, w.Close())
	<-inFlight.done

	deadlineWhenRead(e, &asked, "", "", "mlx5_0", "mlx5_1")
	md = e.scrape(t)
	assert.Equal(t, []string{"mlx5_0", "mlx5_1"}, deviceNames(md))
	dp, ok := findPoint(md, "mlx5_1", semconv.MetricIBPortHWCounter, map[string]string{semconv.AttrIBHWCounter: "out_of_sequence"})
	require.True(t, ok)
	assert.Equal(t, int64(8), dp.IntValue(), "the stale read is discarded, the device read afresh")
	assert.Equal(t, 1, e.countLogs("read again within read_timeout"))
	assert.Equal(t, int64(1), e.skipped(t, "mlx5_1", metadata.ReasonReadTimeout), "no new skip")
	assert.Equal(t, int64(1), e.skipped(t, "mlx5_1", metadata.ReasonReadPending))
}

// Shutdown does not wait for a read blocked in the kernel past
// read_timeout: it logs the device and returns.
func TestShutdownDoesNotWaitForAHungRead(t *testing.T) {
	root, fifo := hungRoot(t)
	cfg := testConfig(root)
	e := newTestEnv(t, cfg)
	var asked []time.Duration
	deadlineWhenRead(e, &asked, "mlx5_1", fifo, "mlx5_0")
	md := e.scrape(t)
	assert.Equal(t, []string{"mlx5_0"}, deviceNames(md))
	inFlight := e.s.devices["mlx5_1"].read

	fired := make(chan time.Time)
	close(fired)
	e.s.newTimer = func(d time.Duration) (<-chan time.Time, func() bool) {
		asked = append(asked, d)
		return fired, func() bool { return true }
	}
	require.NoError(t, e.s.shutdown(context.Background()))
	assert.Equal(t, []time.Duration{DefaultReadTimeout, DefaultReadTimeout}, asked, "shutdown waits at most read_timeout")
	assert.Equal(t, 1, e.countLogs("shutting down with a sysfs read still blocked"))

	// Let the leftover goroutine end (goleak).
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	<-inFlight.done
}

// With the real timer: a scrape whose only device hangs returns once
// read_timeout passes, with no device and the skip counted.
func TestScrapeReturnsAtReadTimeout(t *testing.T) {
	root, fifo := hungRoot(t)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "class/infiniband/mlx5_0")))
	cfg := testConfig(root)
	cfg.ReadTimeout = 10 * time.Millisecond
	e := newTestEnv(t, cfg)
	md := e.scrape(t)
	assert.Zero(t, md.ResourceMetrics().Len())
	assert.Equal(t, int64(1), e.skipped(t, "mlx5_1", metadata.ReasonReadTimeout))

	inFlight := e.s.devices["mlx5_1"].read
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	<-inFlight.done

	// The device went away while its read was in flight: its state goes
	// once the read has returned.
	require.Contains(t, e.s.devices, "mlx5_1")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "class/infiniband/mlx5_1")))
	md = e.scrape(t)
	assert.Zero(t, md.ResourceMetrics().Len())
	assert.NotContains(t, e.s.devices, "mlx5_1")
}
