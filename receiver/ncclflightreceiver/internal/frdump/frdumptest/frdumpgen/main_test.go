package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSyntheticDumpParses(t *testing.T) {
	out := filepath.Join(t.TempDir(), "nccl_trace_rank_3")
	require.NoError(t, run([]string{"-out", out, "-rank", "3", "-entries", "50"}))
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	d, _, err := frdump.Parse(data)
	require.NoError(t, err)
	assert.Len(t, d.Entries, 50)
}

func TestMemoBombIsRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bomb")
	require.NoError(t, run([]string{"-out", out, "-memo-bomb", "-entries", "1000", "-items", "100000"}))
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	_, _, err = frdump.Parse(data)
	assert.ErrorIs(t, err, pickle.ErrLimit)
}

// A rank of a 16-rank job: its default process group lists the 16.
func TestWorldSize(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dump")
	require.NoError(t, run([]string{"-out", out, "-rank", "15", "-world", "16", "-entries", "10"}))
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	d, _, err := frdump.Parse(data)
	require.NoError(t, err)
	assert.Len(t, d.PGConfig["0"].Ranks, 16)
	assert.Error(t, run([]string{"-out", out, "-rank", "16", "-world", "16"}), "a rank outside its world")
}

func TestBadArguments(t *testing.T) {
	assert.Error(t, run(nil), "no -out")
	assert.Error(t, run([]string{"-out", filepath.Join(t.TempDir(), "x"), "-entries", "0"}))
	assert.Error(t, run([]string{"-out", filepath.Join(t.TempDir(), "x"), "stray"}))
}

func TestMoEJobWritesSixteenDumps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fr")
	require.NoError(t, run([]string{"-moe", "gil_hang", "-dir", dir, "-seed", "2", "-culprits", "9,15"}))
	for rank := range 16 {
		path := filepath.Join(dir, "_dump_"+strconv.Itoa(rank))
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		d, _, err := frdump.Parse(data)
		require.NoError(t, err)
		assert.Equal(t, "2.9", d.Version.Raw)
		info, err := os.Stat(path)
		require.NoError(t, err)
		assert.Greater(t, info.ModTime().UnixNano(), d.Entries[len(d.Entries)-1].TimeCreatedNs, "dumped after its last enqueue")
	}
	assert.Error(t, run([]string{"-moe", "nope", "-dir", dir}))
	assert.Error(t, run([]string{"-moe", "gil_hang"}), "no -dir")
	assert.Error(t, run([]string{"-moe", "gil_hang", "-dir", dir, "-culprits", "4,12"}), "two stages")
	assert.Error(t, run([]string{"-moe", "gil_hang", "-dir", dir, "-culprits", "99"}))
}
