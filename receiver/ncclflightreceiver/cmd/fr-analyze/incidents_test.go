package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

var copyTime = time.Date(2026, 12, 5, 18, 47, 0, 0, time.UTC)

// copyRanks copies the dumps of ranks [lo, hi] of a directory of dumps
// named <prefix><rank> into dst, renamed newPrefix<rank>.
func copyRanks(t *testing.T, src, prefix string, lo, hi int, dst, newPrefix string) {
	t.Helper()
	for r := lo; r <= hi; r++ {
		data, err := os.ReadFile(filepath.Join(src, prefix+strconv.Itoa(r)))
		require.NoError(t, err)
		writeDump(t, filepath.Join(dst, newPrefix+strconv.Itoa(r)), data, copyTime.UnixNano())
	}
}

func writeLog(t *testing.T, dir string) {
	t.Helper()
	writeDump(t, filepath.Join(dir, "job.log"), []byte("srun: error: task 12: Exited\n"), 0)
}

// byName maps each incident's directory (relative to root) to it.
func byName(t *testing.T, root string, res result) map[string]incidentResult {
	t.Helper()
	out := map[string]incidentResult{}
	for _, inc := range res.Incidents {
		rel, err := filepath.Rel(root, inc.Name)
		require.NoError(t, err)
		out[filepath.ToSlash(rel)] = inc
	}
	return out
}

// A tree of four incidents: the two real ones as two attempts of one job,
// each copied off its two nodes (ranks 0-7 and 8-15 in two directories);
// the 4-rank hang; the 8-rank straggler with its JSON forms; a job log in
// every directory. Four analyses, each with its own header and answer; the
// files not analysed are counted in one line.
func TestFourIncidents(t *testing.T) {
	root := t.TempDir()
	for _, a := range []struct{ src, dir string }{{realLockGIL, "job-a/attempt-1"}, {realGPUError, "job-a/attempt-2"}} {
		copyRanks(t, a.src, "_dump_", 0, 7, filepath.Join(root, a.dir, "node-0"), "_dump_")
		copyRanks(t, a.src, "_dump_", 8, 15, filepath.Join(root, a.dir, "node-1"), "_dump_")
		writeLog(t, filepath.Join(root, a.dir, "node-0"))
		writeLog(t, filepath.Join(root, a.dir, "node-1"))
	}
	copyRanks(t, fixture("dp4-hang2-v2.4"), "nccl_trace_rank_", 0, 3, filepath.Join(root, "job-b"), "nccl_trace_rank_")
	writeLog(t, filepath.Join(root, "job-b"))
	for r := range 8 {
		for _, ext := range []string{"", ".json"} {
			name := "nccl_trace_rank_" + strconv.Itoa(r) + ext
			data, err := os.ReadFile(filepath.Join(fixture("dp8-straggler5-v2.10"), name))
			require.NoError(t, err)
			writeDump(t, filepath.Join(root, "job-c", name), data, copyTime.UnixNano())
		}
	}
	writeLog(t, filepath.Join(root, "job-c"))

	code, text, res := analyzeArgs(t, root)
	assert.Equal(t, exitFindings, code)
	assert.Empty(t, res.Errors)
	require.Len(t, res.Incidents, 4, text)
	got := byName(t, root, res)
	require.Contains(t, got, "job-a/attempt-1")
	require.Contains(t, got, "job-a/attempt-2")
	require.Contains(t, got, "job-b")
	require.Contains(t, got, "job-c")

	for _, name := range []string{"job-a/attempt-1", "job-a/attempt-2"} {
		inc := got[name]
		assert.Equal(t, 16, inc.WorldSize, name)
		assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, inc.Ranks, name)
		assert.Len(t, inc.Directories, 2, "%s: its two nodes' directories", name)
	}
	// Each attempt gives the answer it gives alone.
	for name, src := range map[string]string{"job-a/attempt-1": realLockGIL, "job-a/attempt-2": realGPUError} {
		_, _, alone := analyzeArgs(t, src)
		assert.Equal(t, kinds(only(t, alone)), kinds(got[name]), name)
		assert.Equal(t, only(t, alone).Findings[0].Ranks, got[name].Findings[0].Ranks, name)
	}
	assert.Equal(t, []string{string(analysis.KindHang)}, kinds(got["job-b"]))
	assert.Equal(t, []int{2}, got["job-b"].Findings[0].Ranks)
	assert.Equal(t, []string{string(analysis.KindStraggler)}, kinds(got["job-c"]))
	assert.Equal(t, []int{5}, got["job-c"].Findings[0].Ranks)

	// Each incident's block opens with its header, then its answer.
	lines := strings.Split(text, "\n")
	var headers []int
	for i, l := range lines {
		if strings.HasPrefix(l, "incident ") {
			headers = append(headers, i)
		}
	}
	require.Len(t, headers, 4, text)
	for n, i := range headers {
		assert.True(t, strings.HasPrefix(lines[i], "incident "+strconv.Itoa(n+1)+" of 4 "+root+string(filepath.Separator)), lines[i])
		assert.True(t, strings.HasPrefix(lines[i+1], "[1] "), "the answer follows the header: %q", lines[i+1])
	}
	// 6 logs and 8 JSON forms of the straggler's ranks: counted, not listed.
	assert.Len(t, res.Skipped, 14)
	assert.Contains(t, text, "\nskipped 14 files: 8 "+reasonDuplicate+"; 6 "+reasonNotDump+" (-v lists them)\n")
	assert.NotContains(t, text, "skipped: ")
	assert.True(t, strings.HasSuffix(text, "\n4 incidents: "+plural(len(got["job-a/attempt-1"].Findings)+len(got["job-a/attempt-2"].Findings)+2, "problem")+" found\n"), text)

	_, verbose, _ := analyzeArgs(t, "-v", root)
	assert.Contains(t, verbose, "skipped: "+filepath.Join(root, "job-b", "job.log")+": "+reasonNotDump+"\n")
	assert.Contains(t, verbose, "skipped: "+filepath.Join(root, "job-c", "nccl_trace_rank_3.json")+": "+reasonDuplicate+": rank 3 is also in ")
}

// Two attempts of one job copied flat into the same node directories (the
// files told apart by their prefixes): the dumps' own times part them, and
// the nodes' halves of each attempt join.
func TestIncidentsSplitByTime(t *testing.T) {
	root := t.TempDir()
	for _, a := range []struct{ src, prefix string }{{realLockGIL, "gil_dump_"}, {realGPUError, "gpu_dump_"}} {
		copyRanks(t, a.src, "_dump_", 0, 7, filepath.Join(root, "node-0"), a.prefix)
		copyRanks(t, a.src, "_dump_", 8, 15, filepath.Join(root, "node-1"), a.prefix)
	}
	_, text, res := analyzeArgs(t, root)
	require.Len(t, res.Incidents, 2, text)
	for _, inc := range res.Incidents {
		assert.Equal(t, root, inc.Name)
		require.Len(t, inc.Dumps, 16)
		prefix := filepath.Base(inc.Dumps[0].Path)[:4]
		for _, d := range inc.Dumps {
			assert.True(t, strings.HasPrefix(filepath.Base(d.Path), prefix), "one attempt's dumps: %s", d.Path)
		}
	}
	assert.Less(t, res.Incidents[0].NewestEntry, res.Incidents[1].NewestEntry, "the same directory: by time")
	assert.Empty(t, res.Skipped)

	// A gap wider than the eight hours between them: their pg_configs
	// still part them (the two runs laid out their groups differently).
	_, text, res = analyzeArgs(t, "--incident-gap", "24h", root)
	require.Len(t, res.Incidents, 2, text)
	assert.Empty(t, res.Skipped)
	for _, inc := range res.Incidents {
		assert.Len(t, inc.Dumps, 16)
	}
}

// Jobs of different world sizes in one directory: two incidents.
func TestIncidentsSplitByWorldSize(t *testing.T) {
	dir := t.TempDir()
	copyRanks(t, fixture("dp4-hang2-v2.4"), "nccl_trace_rank_", 0, 3, dir, "small_")
	copyRanks(t, fixture("dp8-straggler5-v2.10"), "nccl_trace_rank_", 0, 7, dir, "large_")
	_, text, res := analyzeArgs(t, dir)
	require.Len(t, res.Incidents, 2, text)
	worlds := map[int][]string{}
	for _, inc := range res.Incidents {
		worlds[inc.WorldSize] = kinds(inc)
	}
	assert.Equal(t, map[int][]string{4: {string(analysis.KindHang)}, 8: {string(analysis.KindStraggler)}}, worlds)
}

// Ranks missing from an incident are named in its header.
func TestIncidentAbsentRanks(t *testing.T) {
	dir := t.TempDir()
	copyRanks(t, realGPUError, "_dump_", 0, 13, dir, "_dump_")
	_, text, res := analyzeArgs(t, dir)
	inc := only(t, res)
	assert.Equal(t, []int{14, 15}, inc.Absent)
	assert.Contains(t, strings.Split(text, "\n")[0], "; no dump of ranks 14-15;")
}

func TestCommonDir(t *testing.T) {
	assert.Equal(t, "/a/b", commonDir([]string{"/a/b/c", "/a/b/d/e", "/a/b"}))
	assert.Equal(t, "/", commonDir([]string{"/x", "/y"}))
	assert.Equal(t, "a", commonDir([]string{"a/b", "a/c"}))
	assert.Equal(t, ".", commonDir([]string{"a", "b"}))
	assert.Equal(t, "/a/bc", commonDir([]string{"/a/bc"}))
	assert.Equal(t, "/a", commonDir([]string{"/a/bc", "/a/b"}), "not a prefix of names")
}

func frdumpPG(name, desc string) frdump.PGConfig { return frdump.PGConfig{Name: name, Desc: desc} }
