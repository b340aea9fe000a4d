//go:build linux

package ibreceiver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"
)

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(fds)
}

// The receiver holds the devices' files open between scrapes, and closes
// every one on shutdown and when a device goes.
func TestShutdownClosesHeldFiles(t *testing.T) {
	root := copyTree(t, procfsRoot)
	before := openFDs(t)
	e := newTestEnv(t, testConfig(root))
	e.scrape(t)
	held := e.s.files.Held()
	// mlx5_0: 4 device files, 4 port files, 17 counters, 17 hw_counters
	// in the allow-list of which 14 exist; mlx4_0, hfi1_0: fewer.
	assert.Greater(t, held, 60)
	assert.Equal(t, before+held, openFDs(t))
	e.scrape(t)
	assert.Equal(t, held, e.s.files.Held(), "read again, not opened again")
	assert.Equal(t, before+held, openFDs(t))

	// A device goes: its files are closed.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "class/infiniband/mlx5_0")))
	e.scrape(t)
	assert.Less(t, e.s.files.Held(), held)
	assert.Equal(t, before+e.s.files.Held(), openFDs(t))

	require.NoError(t, e.s.shutdown(context.Background()))
	assert.Zero(t, e.s.files.Held())
	assert.Equal(t, before, openFDs(t), "shutdown closes every file")
}

// Past the bound, files are read with open, read, close: the values are
// the same, the reads counted, the bound logged once.
func TestScrapeHeldFilesBounded(t *testing.T) {
	want := newTestEnv(t, testConfig(procfsRoot)).scrape(t)

	e := newTestEnv(t, testConfig(procfsRoot))
	e.s.files = sysfs.NewFileBudget(10)
	before := openFDs(t)
	e.scrape(t)
	got := e.scrape(t)
	assert.Equal(t, 10, e.s.files.Held())
	assert.Equal(t, before+10, openFDs(t))
	for _, d := range []string{"hfi1_0", "mlx4_0", "mlx5_0"} {
		for _, m := range []string{"hw.network.io", "ib.port.hw_counter", "ib.device.info", "hw.errors"} {
			w, wok := findPoint(want, d, m, nil)
			g, gok := findPoint(got, d, m, nil)
			require.Equal(t, wok, gok, "%s %s", d, m)
			if wok {
				assert.Equal(t, w.IntValue(), g.IntValue(), "%s %s", d, m)
			}
		}
	}
	assert.Equal(t, 1, e.countLogs("holding the most sysfs files open"))
	m, err := e.tel.GetMetric("otelcol_ib_files_unheld")
	require.NoError(t, err)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, sum.DataPoints, 1)
	assert.Greater(t, sum.DataPoints[0].Value, int64(2*50))
	require.NoError(t, e.s.shutdown(context.Background()))
	assert.Equal(t, before, openFDs(t))
}
