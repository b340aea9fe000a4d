package testbed

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

type dumpFile struct {
	Entries []struct {
		Seq     int64  `json:"collective_seq_id"`
		Created int64  `json:"time_created_ns"`
		State   string `json:"state"`
	} `json:"entries"`
}

func readDumpFile(t *testing.T, path string) (dumpFile, time.Time) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var d dumpFile
	require.NoError(t, json.Unmarshal(data, &d))
	info, err := os.Stat(path)
	require.NoError(t, err)
	return d, info.ModTime()
}

func withFRDirs(t *testing.T, j *job) {
	dir := t.TempDir()
	for _, nd := range j.nodes {
		nd.frRoot, nd.sysfsRoot = filepath.Join(dir, nd.host, "fr"), filepath.Join(dir, nd.host, "sys")
		nd.frDir = filepath.Join(nd.frRoot, j.id, "0") // layOutDumpDirs' layout
	}
}

// A dump's mtime is its node's clock, as its entries' times are (issue 20:
// the dumps of a lagging or skewed node were written with the reader's
// time, so every rank looked idle for the lag and the receiver named
// healthy ranks as a hang's culprits).
func TestDumpMtimeIsTheNodesClock(t *testing.T) {
	for _, name := range []string{"consumer_lag_10m", "clock_skew_2m"} {
		j := newJob(committed(t, name), "1", 3)
		withFRDirs(t, j)
		start := time.Now()
		end := start.Add(time.Second)
		require.NoError(t, j.recordFlight(1, start, end, j.simulateStep(1)))
		for _, nd := range j.nodes {
			off := j.clockOffset(nd.index)
			rank := nd.index * j.sc.GPUsPerNode
			d, mtime := readDumpFile(t, filepath.Join(nd.frDir, nd.host+"_nccl_trace_rank_"+strconv.Itoa(rank)))
			require.NotEmpty(t, d.Entries)
			// A running rank dumps within its step, in the simulation's time.
			assert.False(t, mtime.Before(start.Add(off).Truncate(time.Second)) || mtime.After(end.Add(off)),
				"%s node %d: mtime %v, the step on the node's clock %v..%v", name, nd.index, mtime, start.Add(off), end.Add(off))
			newest := time.Unix(0, d.Entries[len(d.Entries)-1].Created)
			idle := mtime.Sub(newest)
			assert.Less(t, idle, 2*time.Second, "%s node %d: the dump is as old as its newest entry on one clock", name, nd.index)
		}
	}
}

// A hung job's ranks keep dumping: the dumps are written again, unchanged
// but for a newer mtime, every step after the hang, so that the rank that
// stopped enqueuing shows as stopped once stall_after passes.
func TestStoppedJobKeepsDumping(t *testing.T) {
	sc := committed(t, "nccl_hang")
	j := newJob(sc, "1", 5)
	withFRDirs(t, j)
	in := sc.injections()[0]
	opts := Options{StepSink: func(context.Context, string, []StepRecord) error { return nil }}.withDefaults()
	start := time.Now()
	for step := 0; step <= in.AtStep; step++ {
		at := start.Add(time.Duration(step) * time.Second)
		_, err := j.finishStep(context.Background(), step, at, at.Add(time.Second), j.simulateStep(step), opts, nil)
		require.NoError(t, err)
	}
	require.True(t, j.stopped)
	nd := j.nodes[in.Node]
	culprit := filepath.Join(nd.frDir, nd.host+"_nccl_trace_rank_"+strconv.Itoa(in.Node*sc.GPUsPerNode+in.GPU))
	peer := filepath.Join(nd.frDir, nd.host+"_nccl_trace_rank_"+strconv.Itoa(in.Node*sc.GPUsPerNode+(in.GPU+1)%sc.GPUsPerNode))
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{culprit, peer} {
		require.NoError(t, os.Chtimes(p, old, old))
	}
	before, _ := readDumpFile(t, culprit)
	peerBefore, _ := readDumpFile(t, peer)

	at := start.Add(time.Duration(in.AtStep+1) * time.Second)
	_, err := j.finishStep(context.Background(), in.AtStep+1, at, at.Add(time.Second), j.simulateStep(in.AtStep+1), opts, nil)
	require.NoError(t, err)
	after, mtime := readDumpFile(t, culprit)
	assert.True(t, mtime.After(old), "written again: mtime %v", mtime)
	assert.Equal(t, before, after, "nothing new enqueued")
	peerAfter, peerMtime := readDumpFile(t, peer)
	assert.True(t, peerMtime.After(old))
	assert.Equal(t, peerBefore, peerAfter)
	last := peerAfter.Entries[len(peerAfter.Entries)-1]
	assert.Equal(t, "started", last.State, "the peer waits in the collective the culprit never enqueued")
	assert.Equal(t, after.Entries[len(after.Entries)-1].Seq+1, last.Seq)
}

// The receiver's stall_after is scaled to the step as node_silent's window
// is: 5 steps, well within the 20 steps a hang at step 16 of 36 leaves.
func TestStallAfterScaledToTheStep(t *testing.T) {
	j := newJob(committed(t, "nccl_hang"), "1", 5)
	withFRDirs(t, j)
	for _, step := range []time.Duration{time.Second, 250 * time.Millisecond} {
		opts := Options{StepPeriod: step}.withDefaults()
		text, err := pipelineConfig(opts, []*job{j}, func(*node) string { return "http://127.0.0.1:1/metrics" }, "127.0.0.1:1")
		require.NoError(t, err)
		var cfg struct {
			Receivers map[string]struct {
				FlightRecorder struct {
					StallAfter string `yaml:"stall_after"`
				} `yaml:"flight_recorder"`
			} `yaml:"receivers"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(text), &cfg))
		fr := cfg.Receivers["ncclflight/"+j.nodes[0].host]
		got, err := time.ParseDuration(fr.FlightRecorder.StallAfter)
		require.NoError(t, err)
		assert.Equal(t, 5*step, got)
		assert.Less(t, got, time.Duration(j.sc.Steps-16)*step)
	}
}
