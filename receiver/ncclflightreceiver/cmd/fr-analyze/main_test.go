package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The repository's dump fixtures, with the parser that reads them.
const fixtures = "../../internal/frdump/testdata"

func fixture(name string) string { return filepath.Join(fixtures, name) }

// analyzeArgs runs the command and returns its exit status, its text
// output and, run again with --json, its result.
func analyzeArgs(t *testing.T, args ...string) (int, string, result) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	var jout, jerr bytes.Buffer
	jcode := run(append([]string{"--json"}, args...), &jout, &jerr)
	require.Equal(t, code, jcode, "--json must not change the exit status")
	var res result
	require.NoError(t, json.Unmarshal(jout.Bytes(), &res), "--json prints one JSON object: %s", jout.String())
	assert.Equal(t, code, res.ExitStatus)
	return code, out.String() + errOut.String(), res
}

func kinds(res result) []string {
	out := []string{}
	for _, f := range res.Findings {
		out = append(out, f.Kind)
	}
	return out
}

// The fixtures' mtimes are when they were checked out, long after their
// entries (2025): every rank counts as stopped, as it would for dumps
// copied with their times from a job that hung.

func TestFixtureHang(t *testing.T) {
	code, text, res := analyzeArgs(t, fixture("dp4-hang2-v2.4"))
	assert.Equal(t, exitFindings, code)
	assert.Equal(t, []int{0, 1, 2, 3}, res.Ranks)
	require.Equal(t, []string{string(analysis.KindHang)}, kinds(res), "the missing_ranks and pg_status findings fold into the hang")
	h := res.Findings[0]
	assert.Equal(t, []int{2}, h.Ranks)
	assert.Equal(t, int64(17), h.Seq)
	assert.Equal(t, "nccl:all_reduce", h.Collective)
	assert.Equal(t, "default_pg", h.PGDesc)
	require.Contains(t, h.PythonStacks, "2", "the stuck rank's Python stack")
	assert.NotEmpty(t, h.PythonStacks["2"])
	assert.Contains(t, h.Evidence["folded_findings"], "pg=0/coll:17/missing_ranks")

	assert.Contains(t, text, "read 4 dumps: ranks 0-3 (schema 2.4)")
	assert.Contains(t, text, "[1] HANG in process group 0 (default_pg), collective 17 nccl:all_reduce: ranks 2\n")
	assert.Contains(t, text, "    Hang: ranks {2} stopped")
	assert.Contains(t, text, "    python stack of rank 2:\n      "+h.PythonStacks["2"][0]+"\n")
	assert.NotContains(t, text, "  python stack: ", "the stack is printed one frame a line, not as the message's one line")
	assert.Contains(t, text, "\n1 problems found\n")
}

func TestFixtureStragglerPickleAndJSON(t *testing.T) {
	code, text, res := analyzeArgs(t, fixture("dp8-straggler5-v2.10"))
	assert.Equal(t, exitFindings, code)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, res.Ranks)
	require.Len(t, res.Dumps, 8, "one dump per rank")
	for _, d := range res.Dumps {
		assert.Equal(t, "pickle", d.Form, "the pickle wins over the same rank's JSON: %s", d.Path)
		assert.Equal(t, "2.10", d.Version)
	}
	require.Len(t, res.Skipped, 8)
	for _, s := range res.Skipped {
		assert.True(t, strings.HasSuffix(s.Path, ".json"), s.Path)
		assert.Contains(t, s.Reason, "is also in")
	}
	require.Equal(t, []string{string(analysis.KindStraggler)}, kinds(res))
	s := res.Findings[0]
	assert.Equal(t, []int{5}, s.Ranks)
	assert.NotEmpty(t, s.Evidence["rank.5.mean_enqueue_lag_ms"], "the straggler's evidence")
	assert.Contains(t, text, "STRAGGLER in process group 0 (default_pg)")
	assert.Contains(t, text, "Straggler rank 5: enqueued last in")
	assert.Contains(t, text, "mean enqueue lag behind the median rank")
}

func TestFixtureStragglerJSONOnly(t *testing.T) {
	var paths []string
	for r := range 8 {
		paths = append(paths, filepath.Join(fixture("dp8-straggler5-v2.10"), "nccl_trace_rank_"+strconv.Itoa(r)+".json"))
	}
	code, _, res := analyzeArgs(t, paths...)
	assert.Equal(t, exitFindings, code)
	for _, d := range res.Dumps {
		assert.Equal(t, "json", d.Form)
	}
	require.Equal(t, []string{string(analysis.KindStraggler)}, kinds(res))
	assert.Equal(t, []int{5}, res.Findings[0].Ranks)
}

func TestFixtureHealthy(t *testing.T) {
	code, text, res := analyzeArgs(t, fixture("dp4-healthy-v2.7"))
	assert.Equal(t, exitClean, code)
	assert.Empty(t, res.Findings)
	assert.Empty(t, res.Errors)
	assert.Equal(t, []int{0, 1, 2, 3}, res.Ranks)
	assert.Contains(t, text, "no problem found")
}

// Every fixture at once: the three jobs' dumps share rank numbers, so the
// ranks' newest dumps are analysed together, as fr_trace would do with one
// folder; the point is that nothing is refused.
func TestAllFixturesRead(t *testing.T) {
	_, _, res := analyzeArgs(t, fixtures)
	assert.Empty(t, res.Errors, "every fixture decodes")
	assert.Len(t, res.Dumps, 8)
}

// writeDumps writes dumps as torch does (pickles named prefix<rank>) with
// their dump moments as mtimes.
func writeDump(t *testing.T, path string, data []byte, at int64) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
	if at != 0 {
		require.NoError(t, os.Chtimes(path, time.Unix(0, at), time.Unix(0, at)))
	}
}

func TestMegatronMoE(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		want     int
	}{
		{frdumptest.MoEHealthy, exitClean},
		{frdumptest.MoEGPUError, exitFindings},
		{frdumptest.MoEGILHang, exitFindings},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			dir := t.TempDir()
			for rank, d := range frdumptest.MegatronMoE(frdumptest.MoEConfig{Scenario: tc.scenario, Seed: 1}) {
				// Two nodes' directories, as copied off the nodes.
				node := "node" + strconv.Itoa(rank/8)
				writeDump(t, filepath.Join(dir, node, frdumptest.MoEFileName(rank)), frdumptest.Pickle(d), d.DumpedAtNs)
			}
			code, text, res := analyzeArgs(t, dir)
			assert.Equal(t, tc.want, code, text)
			assert.Len(t, res.Ranks, frdumptest.MoEWorld)
			if tc.want == exitClean {
				assert.Empty(t, res.Findings, text)
				return
			}
			var hang *finding
			for i := range res.Findings {
				if res.Findings[i].Kind == string(analysis.KindHang) {
					require.Nil(t, hang, "one hang finding")
					hang = &res.Findings[i]
				}
			}
			require.NotNil(t, hang, text)
			assert.Equal(t, []int{4, 5}, hang.Ranks)
			assert.Equal(t, "nccl:all_to_all", hang.Collective)
			assert.Equal(t, "EXPERT_MODEL_PARALLEL_GROUP", hang.PGDesc)
			for _, r := range []string{"4", "5"} {
				require.Contains(t, hang.PythonStacks, r)
				assert.Contains(t, strings.Join(hang.PythonStacks[r], "\n"), "megatron/", "rank %s", r)
			}
			assert.Contains(t, text, "python stack of rank 4:\n")
			assert.Contains(t, text, "python stack of rank 5:\n")
		})
	}
}

// hangDumps decodes the dp4-hang2 fixture's dumps.
func hangDumps(t *testing.T) []*frdump.Dump {
	t.Helper()
	out := make([]*frdump.Dump, 4)
	for r := range out {
		data, err := os.ReadFile(filepath.Join(fixture("dp4-hang2-v2.4"), "nccl_trace_rank_"+strconv.Itoa(r)))
		require.NoError(t, err)
		out[r], _, err = frdump.Parse(data)
		require.NoError(t, err)
	}
	return out
}

// A hand-made directory of mixed versions, forms, prefixes and nodes: ranks
// 0 and 2 as the fixture's v2.4 pickles, rank 1 rewritten as a v2.3 JSON
// dump, rank 3 as a v2.10 pickle, under two node directories.
func mixedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	d := hangDumps(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() // long after the entries: every rank stopped
	writeDump(t, filepath.Join(dir, "node-a", "nccl_trace_rank_0"), frdumptest.Pickle(d[0]), at)
	d[1].Version = frdump.Oldest
	js, err := frdumptest.JSON(d[1])
	require.NoError(t, err)
	writeDump(t, filepath.Join(dir, "node-a", "trace_1.json"), js, at)
	writeDump(t, filepath.Join(dir, "node-b", "_dump_2"), frdumptest.Pickle(d[2]), at)
	d[3].Version = frdump.Newest
	writeDump(t, filepath.Join(dir, "node-b", "fr-3.pkl"), frdumptest.Pickle(d[3]), at)
	writeDump(t, filepath.Join(dir, "node-b", "slurm-1234.out"), []byte("srun: error: node-b: task 2: Exited\n"), 0)
	return dir
}

func TestMixedVersionsFormsAndNodes(t *testing.T) {
	dir := mixedDir(t)
	code, text, res := analyzeArgs(t, dir)
	assert.Equal(t, exitFindings, code)
	assert.Empty(t, res.Errors)
	assert.Equal(t, []int{0, 1, 2, 3}, res.Ranks)
	versions := map[int]string{}
	for _, d := range res.Dumps {
		versions[d.Rank] = d.Version + "/" + d.Form
	}
	assert.Equal(t, map[int]string{0: "2.4/pickle", 1: "2.3/json", 2: "2.4/pickle", 3: "2.10/pickle"}, versions)
	require.Len(t, res.Skipped, 1, "the job's log beside the dumps is no dump")
	assert.Equal(t, filepath.Join(dir, "node-b", "slurm-1234.out"), res.Skipped[0].Path)
	require.Equal(t, []string{string(analysis.KindHang)}, kinds(res), text)
	assert.Equal(t, []int{2}, res.Findings[0].Ranks)
	assert.Contains(t, res.Findings[0].PythonStacks, "2")
	assert.Contains(t, text, "(schema 2.10, 2.3, 2.4)")
}

func TestCorruptDumpNamedRestAnalysed(t *testing.T) {
	dir := mixedDir(t)
	bad := filepath.Join(dir, "node-a", "nccl_trace_rank_0")
	data, err := os.ReadFile(bad)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad, data[:len(data)/2], 0o644)) // cut off mid-write

	code, text, res := analyzeArgs(t, dir)
	assert.Equal(t, exitFindings, code, "a problem in the rest outweighs the unreadable file")
	require.Len(t, res.Errors, 1)
	assert.Equal(t, bad, res.Errors[0].Path)
	assert.Contains(t, text, "error: "+bad+": ")
	assert.Equal(t, []int{1, 2, 3}, res.Ranks)
	require.Equal(t, []string{string(analysis.KindHang)}, kinds(res), text)
	assert.Equal(t, []int{2}, res.Findings[0].Ranks)
}

func TestCorruptDumpBesideHealthyOnes(t *testing.T) {
	dir := t.TempDir()
	for r := range 4 {
		data, err := os.ReadFile(filepath.Join(fixture("dp4-healthy-v2.7"), "nccl_trace_rank_"+strconv.Itoa(r)))
		require.NoError(t, err)
		if r == 3 {
			data = append([]byte("{\"version\": \"2.7\", \"entries\": ["), data[:10]...)
		}
		writeDump(t, filepath.Join(dir, "rank_"+strconv.Itoa(r)), data, 0)
	}
	code, text, res := analyzeArgs(t, dir)
	assert.Equal(t, exitError, code, "the analysis is incomplete: no clean bill")
	require.Len(t, res.Errors, 1, text)
	assert.Equal(t, filepath.Join(dir, "rank_3"), res.Errors[0].Path)
	assert.Empty(t, res.Findings)
	assert.Equal(t, []int{0, 1, 2}, res.Ranks)
}

func TestInputErrors(t *testing.T) {
	dir := t.TempDir()
	noRank := filepath.Join(dir, "trace.pkl")
	data, err := os.ReadFile(filepath.Join(fixture("dp4-healthy-v2.7"), "nccl_trace_rank_0"))
	require.NoError(t, err)
	writeDump(t, noRank, data, 0)
	notDump := filepath.Join(dir, "notes_1.txt")
	writeDump(t, notDump, []byte("hello"), 0)
	missing := filepath.Join(dir, "nccl_trace_rank_9")

	code, text, res := analyzeArgs(t, noRank, notDump, missing)
	assert.Equal(t, exitError, code)
	require.Len(t, res.Errors, 3, text)
	got := map[string]string{}
	for _, e := range res.Errors {
		got[e.Path] = e.Reason
	}
	assert.Contains(t, got[noRank], "cannot tell the rank")
	assert.Contains(t, got[notDump], "not a flight recorder dump", "a file named on the command line must be a dump")
	assert.Contains(t, got[missing], "no such file")
	assert.Empty(t, res.Dumps)
}

func TestFileSizeLimit(t *testing.T) {
	code, text, res := analyzeArgs(t, "--max-file-size", "1000", fixture("dp4-healthy-v2.7"))
	assert.Equal(t, exitError, code)
	require.Len(t, res.Errors, 4, text)
	assert.Contains(t, res.Errors[0].Reason, "over --max-file-size 1000")

	var out, errOut bytes.Buffer
	require.Equal(t, exitClean, run([]string{"--help"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "(default "+strconv.Itoa(frdump.DefaultMaxJSONBytes)+")", "the receiver's default max_file_size")
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, exitError, run(nil, &out, &errOut))
	assert.Contains(t, errOut.String(), "no dump or directory given")
	errOut.Reset()
	assert.Equal(t, exitError, run([]string{"--bogus"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "usage: fr-analyze")
	errOut.Reset()
	assert.Equal(t, exitError, run([]string{"--stall-after", "0s", "x"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "must be greater than 0")
}

// A rank dumped while it still enqueued (its dump's mtime shortly after its
// newest entry) is not a culprit: --stall-after is the receiver's
// stall_after.
func TestStallAfter(t *testing.T) {
	dir := t.TempDir()
	for r, d := range hangDumps(t) {
		var newest int64
		for _, e := range d.Entries {
			newest = max(newest, e.TimeCreatedNs)
		}
		writeDump(t, filepath.Join(dir, "rank_"+strconv.Itoa(r)), frdumptest.Pickle(d), newest+int64(10*time.Second))
	}
	_, _, res := analyzeArgs(t, "--stall-after", "1m", dir)
	assert.NotContains(t, kinds(res), string(analysis.KindHang), "dumped 10 s after the newest enqueue: not stopped")
	_, _, res = analyzeArgs(t, "--stall-after", "5s", dir)
	assert.Contains(t, kinds(res), string(analysis.KindHang))
}

// Copies that lost their mtimes: nothing is called stopped, and the
// per-group findings come out, the missing ranks' with the stacks of the
// missing rank and of those waiting in the collective.
func TestIgnoreMtime(t *testing.T) {
	code, text, res := analyzeArgs(t, "--ignore-mtime", fixture("dp4-hang2-v2.4"))
	assert.Equal(t, exitFindings, code)
	require.Equal(t, []string{string(analysis.KindMissingRanks), string(analysis.KindPGStatusDivergence)}, kinds(res), text)
	m := res.Findings[0]
	assert.Equal(t, []int{2}, m.Ranks)
	assert.Len(t, m.PythonStacks, 4, "the missing rank's stack and the three waiting ranks'")
	assert.Contains(t, text, "MISSING RANKS in process group 0 (default_pg), collective 17 nccl:all_reduce: ranks 2\n")
	assert.Contains(t, text, "    Not all ranks joining collective, sequence number: 17\n")
	assert.Contains(t, text, "python stack of rank 0:\n")
}
