//go:build unix

package sysfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "sys")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// readBoth reads device name with an unheld Reader and with r (held), and
// requires the same result.
func readBoth(t *testing.T, root string, r *Reader, name string, opts ReadOptions, held *Device) {
	t.Helper()
	var want Device
	require.NoError(t, NewReader(root).ReadDevice(name, opts, &want))
	require.NoError(t, r.ReadDevice(name, opts, held))
	assert.Equal(t, want, *held, "%s %+v", name, opts)
}

// A held Reader reads every fixture device as an unheld one does, the
// first time (opening) and the next (pread), and Close gives its files back.
func TestHeldReaderReadsAsOpenReadClose(t *testing.T) {
	neOpts := ReadOptions{Counters: append(slices.Clone(PortCounterNames), "unicast_xmit_packets"), ExtCounters: ExtCounterNames, HWCounters: []string{"lifespan", "out_of_sequence"}}
	for _, root := range []string{procfsRoot, nodeExporterRoot} {
		names, err := NewReader(root).DeviceNames()
		require.NoError(t, err)
		for _, opts := range []ReadOptions{{}, {AllHWCounters: true}, {HWCounters: []string{"out_of_sequence", "np_cnp_sent"}}, neOpts} {
			budget := NewFileBudget(1000)
			for _, name := range names {
				r := NewHeldReader(root, budget)
				var d Device
				for range 3 {
					readBoth(t, root, r, name, opts, &d)
				}
				assert.Positive(t, budget.Held(), name)
				r.Close()
				assert.Zero(t, budget.Held(), "%s: Close gives every file back", name)
				readBoth(t, root, r, name, opts, &d) // usable after Close
				r.Close()
			}
			assert.Zero(t, budget.TakeRefused())
		}
	}
}

// Values written in place are read from the held file; a port that goes
// gives its files back; a device made anew (another directory under the
// same name: a driver reload) is opened anew; a file that grows past the
// buffer is refused and read again when it shrinks; garbage is reported as
// by an unheld Reader.
func TestHeldReaderFollowsChanges(t *testing.T) {
	root := copyTree(t, procfsRoot)
	dev := filepath.Join(root, ClassDir, "mlx5_0")
	require.NoError(t, os.CopyFS(filepath.Join(dev, "ports/2"), os.DirFS(filepath.Join(dev, "ports/1"))))
	budget := NewFileBudget(1000)
	r := NewHeldReader(root, budget)
	opts := ReadOptions{AllHWCounters: true}
	var d Device
	readBoth(t, root, r, "mlx5_0", opts, &d)
	both := budget.Held()

	writeFile(t, filepath.Join(dev, "ports/1/counters/port_xmit_data"), "5\n")
	writeFile(t, filepath.Join(dev, "ports/2/state"), "1: DOWN\n")
	readBoth(t, root, r, "mlx5_0", opts, &d)
	assert.Equal(t, Counter{Name: PortXmitData, Value: 5}, counterMap(d.Ports[0].Counters)[PortXmitData])
	assert.Equal(t, State{Code: 1, Text: "DOWN", Present: true}, d.Ports[1].State)
	assert.Equal(t, both, budget.Held(), "read again, not opened again")

	require.NoError(t, os.RemoveAll(filepath.Join(dev, "ports/2")))
	readBoth(t, root, r, "mlx5_0", opts, &d)
	require.Len(t, d.Ports, 1)
	one := budget.Held()
	assert.Less(t, one, both, "the port's files are given back")

	// The device directory is made again with other values: the old files
	// (still readable on this file system) are not read.
	require.NoError(t, os.RemoveAll(dev))
	require.NoError(t, os.CopyFS(dev, os.DirFS(filepath.Join(procfsRoot, ClassDir, "mlx5_0"))))
	writeFile(t, filepath.Join(dev, "ports/1/counters/port_xmit_data"), "6\n")
	writeFile(t, filepath.Join(dev, "hca_type"), "MT4129\n")
	readBoth(t, root, r, "mlx5_0", opts, &d)
	assert.Equal(t, uint64(6), counterMap(d.Ports[0].Counters)[PortXmitData].Value)
	assert.Equal(t, "MT4129", d.HCAType.Value)
	assert.Equal(t, one, budget.Held())

	// Too long, then garbage, then right again.
	p := filepath.Join(dev, "ports/1/counters/symbol_error")
	writeFile(t, p, strings.Repeat("1", 5000))
	readBoth(t, root, r, "mlx5_0", opts, &d)
	require.ErrorIs(t, counterMap(d.Ports[0].Counters)["symbol_error"].Err, ErrTooLong)
	writeFile(t, p, strings.Repeat("1", 4096))
	readBoth(t, root, r, "mlx5_0", opts, &d)
	require.ErrorIs(t, counterMap(d.Ports[0].Counters)["symbol_error"].Err, ErrTooLong, "a full buffer is too long, as unheld")
	writeFile(t, p, "12ab\n")
	readBoth(t, root, r, "mlx5_0", opts, &d)
	require.ErrorIs(t, counterMap(d.Ports[0].Counters)["symbol_error"].Err, ErrSyntax)
	writeFile(t, p, "9\n")
	readBoth(t, root, r, "mlx5_0", opts, &d)
	assert.Equal(t, uint64(9), counterMap(d.Ports[0].Counters)["symbol_error"].Value)

	// A file that goes is missing, as unheld; it comes back.
	require.NoError(t, os.Remove(filepath.Join(dev, "ports/1/hw_counters/out_of_sequence")))
	readBoth(t, root, r, "mlx5_0", opts, &d)
	assert.NotContains(t, counterMap(d.Ports[0].HWCounters), "out_of_sequence")
	writeFile(t, filepath.Join(dev, "ports/1/hw_counters/out_of_sequence"), "3\n")
	readBoth(t, root, r, "mlx5_0", opts, &d)
	assert.Equal(t, uint64(3), counterMap(d.Ports[0].HWCounters)["out_of_sequence"].Value)

	// A held descriptor that fails (here closed behind the Reader's back,
	// as a removed device's files fail with ENODEV) is opened once more.
	h := &r.dev.ports[0].counters.files[0]
	require.NotNil(t, h.f)
	require.NoError(t, h.f.Close())
	readBoth(t, root, r, "mlx5_0", opts, &d)
	assert.Equal(t, uint64(6), counterMap(d.Ports[0].Counters)[PortXmitData].Value)
	assert.Equal(t, one, budget.Held())

	r.Close()
	assert.Zero(t, budget.Held())
}

// Past the budget, files are read with open, read, close, counted.
func TestHeldReaderBudget(t *testing.T) {
	budget := NewFileBudget(5)
	r := NewHeldReader(procfsRoot, budget)
	var d Device
	for range 2 {
		readBoth(t, procfsRoot, r, "mlx5_0", ReadOptions{AllHWCounters: true}, &d)
		assert.Equal(t, 5, budget.Held())
	}
	refused := budget.TakeRefused()
	// 4 device files, 4 port files, 17 counters, 24 hw_counters: 49 files,
	// 5 held; counters_ext is absent (one failed open, not refused).
	assert.Equal(t, int64(2*(49-5)), refused)
	assert.Zero(t, budget.TakeRefused(), "reset")
	r.Close()
	assert.Zero(t, budget.Held())

	none := NewFileBudget(0)
	r = NewHeldReader(procfsRoot, none)
	var d2 Device
	readBoth(t, procfsRoot, r, "mlx5_0", ReadOptions{}, &d2)
	assert.Zero(t, none.Held())
}

// A FIFO (a hung driver read in the deadline tests) is never held: it is
// read with open, read, close, as before.
func TestHeldReaderDoesNotHoldOtherFiles(t *testing.T) {
	root := copyTree(t, procfsRoot)
	// A directory where a counter file is expected: an error, as unheld.
	p := filepath.Join(root, ClassDir, "mlx5_0/ports/1/counters/symbol_error")
	require.NoError(t, os.Remove(p))
	require.NoError(t, os.Mkdir(p, 0o755))
	budget := NewFileBudget(1000)
	r := NewHeldReader(root, budget)
	var d Device
	readBoth(t, root, r, "mlx5_0", ReadOptions{}, &d)
	require.Error(t, counterMap(d.Ports[0].Counters)["symbol_error"].Err)
	assert.Nil(t, r.dev.ports[0].counters.files[slices.Index(r.dev.ports[0].counters.names, "symbol_error")].f)
	r.Close()
}

// A file replaced by a rename over it (how the tests and the testbed write
// their trees; sysfs changes values in place) is read anew, not from the
// descriptor held on the old file: counters, port attributes and device
// files alike.
func TestHeldReaderFollowsReplacedFiles(t *testing.T) {
	root := copyTree(t, procfsRoot)
	dev := filepath.Join(root, ClassDir, "mlx5_0")
	budget := NewFileBudget(1000)
	r := NewHeldReader(root, budget)
	opts := ReadOptions{AllHWCounters: true}
	var d Device
	readBoth(t, root, r, "mlx5_0", opts, &d)

	replace := func(path, content string) {
		t.Helper()
		tmp := path + ".tmp"
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
		require.NoError(t, os.Rename(tmp, path))
	}
	// A directory's mtime has the file system's granularity: make sure
	// the renames land on another tick than the first read's.
	time.Sleep(20 * time.Millisecond)
	replace(filepath.Join(dev, "ports/1/counters/port_xmit_data"), "7\n")
	replace(filepath.Join(dev, "ports/1/state"), "1: DOWN\n")
	replace(filepath.Join(dev, "hca_type"), "MT9999\n")
	readBoth(t, root, r, "mlx5_0", opts, &d)
	assert.Equal(t, uint64(7), counterMap(d.Ports[0].Counters)[PortXmitData].Value)
	assert.Equal(t, State{Code: 1, Text: "DOWN", Present: true}, d.Ports[0].State)
	assert.Equal(t, "MT9999", d.HCAType.Value)
}
