package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// only is the one incident the command found.
func only(t *testing.T, res result) incidentResult {
	t.Helper()
	require.Len(t, res.Incidents, 1, "one incident")
	return res.Incidents[0]
}

func kinds(inc incidentResult) []string {
	out := []string{}
	for _, f := range inc.Findings {
		out = append(out, f.Kind)
	}
	return out
}

// The fixtures' mtimes are when they were checked out, long after their
// entries (2025); the command does not read them: a rank's idle time runs
// to the dump moment the dumps themselves give (newest entry + timeout_ms).

func TestFixtureHang(t *testing.T) {
	code, text, res := analyzeArgs(t, fixture("dp4-hang2-v2.4"))
	assert.Equal(t, exitFindings, code)
	inc := only(t, res)
	assert.Equal(t, []int{0, 1, 2, 3}, inc.Ranks)
	assert.Equal(t, 4, inc.WorldSize)
	assert.Empty(t, inc.Absent)
	require.Equal(t, []string{string(analysis.KindHang)}, kinds(inc), "the missing_ranks and pg_status findings fold into the hang")
	h := inc.Findings[0]
	assert.Equal(t, []int{2}, h.Ranks)
	assert.Equal(t, int64(17), h.Seq)
	assert.Equal(t, "nccl:all_reduce", h.Collective)
	assert.Equal(t, "default_pg", h.PGDesc)
	require.Contains(t, h.PythonStacks, "2", "the stuck rank's Python stack")
	assert.NotEmpty(t, h.PythonStacks["2"])
	assert.Contains(t, h.Evidence["folded_findings"], "pg=0/coll:17/missing_ranks")

	require.NotNil(t, h.Shape, "the collective's sizes, from the dumps")
	var want *frdump.Entry
	for i, e := range hangDumps(t)[0].Entries {
		if e.CollectiveSeqID == 17 && !e.IsP2P {
			want = &hangDumps(t)[0].Entries[i]
		}
	}
	require.NotNil(t, want)
	assert.Equal(t, 0, h.Shape.Rank, "the lowest rank that enqueued it")
	assert.Equal(t, want.InputSizes, h.Shape.InputSizes)
	assert.Equal(t, want.InputDtypes, h.Shape.InputDtypes)
	assert.Equal(t, want.OutputDtypes, h.Shape.OutputDtypes)
	lines := strings.Split(text, "\n")
	assert.Equal(t, "incident "+fixture("dp4-hang2-v2.4")+": world 4, 4 dumps of ranks 0-3 (schema 2.4), newest entry "+inc.NewestEntry+
		"; dump moment: "+inc.DumpMoment, lines[0])
	assert.Equal(t, "[1] HANG in process group 0 (default_pg), collective 17 nccl:all_reduce: ranks 2", lines[1])
	assert.Equal(t, "    input "+sizesText(want.InputSizes)+" "+want.InputDtypes[0]+", output "+sizesText(want.OutputSizes)+" "+want.OutputDtypes[0]+" (rank 0's entry)", lines[2])
	assert.Contains(t, text, "    Hang: ranks {2} stopped")
	assert.Contains(t, text, "    python stack of rank 2:\n      "+h.PythonStacks["2"][0]+"\n")
	assert.NotContains(t, text, "  python stack: ", "the stack is printed one frame a line, not as the message's one line")
	assert.True(t, strings.HasSuffix(text, "\n1 incident: 1 problem found\n"), text)
}

func TestFixtureStragglerPickleAndJSON(t *testing.T) {
	code, text, res := analyzeArgs(t, fixture("dp8-straggler5-v2.10"))
	assert.Equal(t, exitFindings, code)
	inc := only(t, res)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, inc.Ranks)
	require.Len(t, inc.Dumps, 8, "one dump per rank")
	for _, d := range inc.Dumps {
		assert.Equal(t, "pickle", d.Form, "the pickle wins over the same rank's JSON: %s", d.Path)
		assert.Equal(t, "2.10", d.Version)
	}
	require.Len(t, res.Skipped, 8)
	for _, s := range res.Skipped {
		assert.True(t, strings.HasSuffix(s.Path, ".json"), s.Path)
		assert.Equal(t, reasonDuplicate, s.Reason)
		assert.Contains(t, s.Detail, "is also in")
	}
	assert.Contains(t, text, "\nskipped 8 files: 8 "+reasonDuplicate+" (-v lists them)\n", "counted, not listed")
	require.Equal(t, []string{string(analysis.KindStraggler)}, kinds(inc))
	s := inc.Findings[0]
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
	inc := only(t, res)
	for _, d := range inc.Dumps {
		assert.Equal(t, "json", d.Form)
	}
	require.Equal(t, []string{string(analysis.KindStraggler)}, kinds(inc))
	assert.Equal(t, []int{5}, inc.Findings[0].Ranks)
}

func TestFixtureHealthy(t *testing.T) {
	code, text, res := analyzeArgs(t, fixture("dp4-healthy-v2.7"))
	assert.Equal(t, exitClean, code)
	inc := only(t, res)
	assert.Empty(t, inc.Findings)
	assert.Empty(t, res.Errors)
	assert.Equal(t, []int{0, 1, 2, 3}, inc.Ranks)
	assert.Equal(t, "no problem found", strings.Split(text, "\n")[1])
}

// Every fixture at once: three jobs whose dumps share rank numbers, each
// directory a full set of ranks: three incidents, each with its own answer.
func TestAllFixturesRead(t *testing.T) {
	code, text, res := analyzeArgs(t, fixtures)
	assert.Equal(t, exitFindings, code)
	assert.Empty(t, res.Errors, "every fixture decodes")
	require.Len(t, res.Incidents, 3, text)
	answers := map[string][]string{}
	for _, inc := range res.Incidents {
		answers[filepath.Base(inc.Name)] = kinds(inc)
	}
	assert.Equal(t, map[string][]string{
		"dp4-hang2-v2.4":       {string(analysis.KindHang)},
		"dp4-healthy-v2.7":     {},
		"dp8-straggler5-v2.10": {string(analysis.KindStraggler)},
	}, answers)
	assert.Contains(t, text, "incident 1 of 3 "+fixture("dp4-hang2-v2.4")+": world 4,")
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

// The generated Megatron MoE job, one directory per node. Its healthy
// scenario dumps on demand, each rank at another moment while the job
// runs: only the files' mtimes (--use-mtime, kept by the copy) tell those
// moments; the dumps themselves do not record them, and the estimate from
// the dumps (newest entry + timeout_ms) holds for dumps the watchdog wrote
// on a timeout, as in the two hangs, which give the same answer either way.
func TestMegatronMoE(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		args     []string
		want     int
	}{
		{frdumptest.MoEHealthy, []string{"--use-mtime"}, exitClean},
		{frdumptest.MoEGPUError, []string{"--use-mtime"}, exitFindings},
		{frdumptest.MoEGILHang, []string{"--use-mtime"}, exitFindings},
		{frdumptest.MoEGPUError, nil, exitFindings},
		{frdumptest.MoEGILHang, nil, exitFindings},
	} {
		t.Run(tc.scenario+strings.Join(tc.args, ""), func(t *testing.T) {
			dir := t.TempDir()
			for rank, d := range frdumptest.MegatronMoE(frdumptest.MoEConfig{Scenario: tc.scenario, Seed: 1}) {
				// Two nodes' directories, as copied off the nodes.
				node := "node" + strconv.Itoa(rank/8)
				writeDump(t, filepath.Join(dir, node, frdumptest.MoEFileName(rank)), frdumptest.Pickle(d), d.DumpedAtNs)
			}
			code, text, res := analyzeArgs(t, append(tc.args, dir)...)
			assert.Equal(t, tc.want, code, text)
			inc := only(t, res)
			assert.Equal(t, dir, inc.Name, "the two node directories are one incident")
			assert.Equal(t, []string{filepath.Join(dir, "node0"), filepath.Join(dir, "node1")}, inc.Directories)
			assert.Len(t, inc.Ranks, frdumptest.MoEWorld)
			if tc.want == exitClean {
				assert.Empty(t, inc.Findings, text)
				return
			}
			var hang *finding
			for i := range inc.Findings {
				if inc.Findings[i].Kind == string(analysis.KindHang) {
					require.Nil(t, hang, "one hang finding")
					hang = &inc.Findings[i]
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
	inc := only(t, res)
	assert.Equal(t, []int{0, 1, 2, 3}, inc.Ranks)
	versions := map[int]string{}
	for _, d := range inc.Dumps {
		versions[d.Rank] = d.Version + "/" + d.Form
	}
	assert.Equal(t, map[int]string{0: "2.4/pickle", 1: "2.3/json", 2: "2.4/pickle", 3: "2.10/pickle"}, versions)
	require.Len(t, res.Skipped, 1, "the job's log beside the dumps is no dump")
	assert.Equal(t, filepath.Join(dir, "node-b", "slurm-1234.out"), res.Skipped[0].Path)
	require.Equal(t, []string{string(analysis.KindHang)}, kinds(inc), text)
	assert.Equal(t, []int{2}, inc.Findings[0].Ranks)
	assert.Contains(t, inc.Findings[0].PythonStacks, "2")
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
	inc := only(t, res)
	assert.Equal(t, []int{1, 2, 3}, inc.Ranks)
	assert.Equal(t, []int{0}, inc.Absent)
	require.Equal(t, []string{string(analysis.KindHang)}, kinds(inc), text)
	assert.Equal(t, []int{2}, inc.Findings[0].Ranks)
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
	inc := only(t, res)
	assert.Empty(t, inc.Findings)
	assert.Equal(t, []int{0, 1, 2}, inc.Ranks)
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
	assert.Empty(t, res.Incidents)
	assert.Contains(t, text, "\nno dump read\n")
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
	for _, tc := range []struct{ args, want string }{
		{"--stall-after 0s", "--stall-after 0s: must be greater than 0"},
		{"--incident-gap -1m", "--incident-gap -1m0s: must be greater than 0"},
		{"--max-file-size 0", "--max-file-size 0: must be greater than 0"},
	} {
		errOut.Reset()
		assert.Equal(t, exitError, run(append(strings.Fields(tc.args), "x"), &out, &errOut), tc.args)
		assert.Contains(t, errOut.String(), tc.want)
	}
}

// --use-mtime: the files' mtimes are the dump moments, as the receiver
// reads them on the node. A rank dumped while it still enqueued (its dump's
// mtime shortly after its newest entry) is not a culprit: --stall-after is
// the receiver's stall_after.
func TestUseMtimeStallAfter(t *testing.T) {
	dir := t.TempDir()
	for r, d := range hangDumps(t) {
		var newest int64
		for _, e := range d.Entries {
			newest = max(newest, e.TimeCreatedNs)
		}
		writeDump(t, filepath.Join(dir, "rank_"+strconv.Itoa(r)), frdumptest.Pickle(d), newest+int64(10*time.Second))
	}
	_, text, res := analyzeArgs(t, "--use-mtime", "--stall-after", "1m", dir)
	inc := only(t, res)
	assert.Equal(t, timeBaseMtime, res.TimeBase)
	assert.Equal(t, "file mtimes", inc.DumpMoment)
	assert.Contains(t, strings.Split(text, "\n")[0], "; dump moment: file mtimes")
	assert.NotContains(t, kinds(inc), string(analysis.KindHang), "dumped 10 s after the newest enqueue: not stopped")
	_, _, res = analyzeArgs(t, "--use-mtime", "--stall-after", "5s", dir)
	assert.Contains(t, kinds(only(t, res)), string(analysis.KindHang))

	// Without --use-mtime the same files give the dumps' own answer,
	// whatever their mtimes: the dump moment is the newest entry +
	// timeout_ms (10 min here).
	_, _, res = analyzeArgs(t, "--stall-after", "1m", dir)
	inc = only(t, res)
	assert.Equal(t, timeBaseEntries, res.TimeBase)
	assert.Equal(t, "newest entry + timeout_ms 600000", inc.DumpMoment)
	assert.Equal(t, []string{string(analysis.KindHang)}, kinds(inc))
	for _, d := range inc.Dumps {
		assert.Equal(t, inc.Dumps[0].DumpedAt, d.DumpedAt, "one dump moment for the incident")
		assert.NotEqual(t, d.FileMtime, d.DumpedAt)
	}
}

// A --stall-after longer than the dumps' timeout: no rank is idle that
// long before the dump moment, nothing is called stopped, and the
// per-group findings come out, the missing ranks' with the stacks of the
// missing rank and of those waiting in the collective.
func TestStallAfterBeyondTimeout(t *testing.T) {
	code, text, res := analyzeArgs(t, "--stall-after", "11m", fixture("dp4-hang2-v2.4"))
	assert.Equal(t, exitFindings, code)
	inc := only(t, res)
	require.Equal(t, []string{string(analysis.KindMissingRanks), string(analysis.KindPGStatusDivergence)}, kinds(inc), text)
	m := inc.Findings[0]
	assert.Equal(t, []int{2}, m.Ranks)
	assert.Len(t, m.PythonStacks, 4, "the missing rank's stack and the three waiting ranks'")
	assert.Contains(t, text, "MISSING RANKS in process group 0 (default_pg), collective 17 nccl:all_reduce: ranks 2\n")
	assert.Contains(t, text, "    Not all ranks joining collective, sequence number: 17\n")
	assert.Contains(t, text, "python stack of rank 0:\n")
}

// --ignore-mtime, from before, is the default now: the same output.
func TestIgnoreMtimeIsTheDefault(t *testing.T) {
	_, text, _ := analyzeArgs(t, fixture("dp4-hang2-v2.4"))
	_, ignored, _ := analyzeArgs(t, "--ignore-mtime", fixture("dp4-hang2-v2.4"))
	assert.Equal(t, text, ignored)

	var out, errOut bytes.Buffer
	assert.Equal(t, exitError, run([]string{"--ignore-mtime", "--use-mtime", fixture("dp4-hang2-v2.4")}, &out, &errOut))
	assert.Contains(t, errOut.String(), "--use-mtime and --ignore-mtime contradict each other")
	assert.Empty(t, out.String())
}

// Generated incidents in the real format (only the operations in flight:
// the GIL-stuck ranks dump no entries) give the reference's kind of answer
// on both of fr-analyze's time bases, the dumps' own (newest entry +
// timeout_ms) and the files' (--use-mtime): the first finding is the hang
// naming the culprits and the expert all_to_all; the healthy control,
// dumped on demand, gives nothing on either.
func TestMegatronMoERealFormat(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		culprits []int
	}{
		{frdumptest.MoEGILHang, []int{9, 14}},
		{frdumptest.MoEGPUError, []int{2, 3}},
		{frdumptest.MoEGPUError, []int{12}},
		{frdumptest.MoEHealthy, nil},
	} {
		dir := t.TempDir()
		for rank, d := range frdumptest.MegatronMoE(frdumptest.MoEConfig{Scenario: tc.scenario, Culprits: tc.culprits, Seed: 2, OnlyActive: true}) {
			writeDump(t, filepath.Join(dir, frdumptest.MoEFileName(rank)), frdumptest.Pickle(d), d.DumpedAtNs)
		}
		for _, args := range [][]string{{dir}, {"--use-mtime", dir}} {
			name := fmt.Sprintf("%s%v %v", tc.scenario, tc.culprits, args[:len(args)-1])
			code, text, res := analyzeArgs(t, args...)
			inc := only(t, res)
			if tc.culprits == nil {
				assert.Equal(t, exitClean, code, "%s\n%s", name, text)
				assert.Empty(t, inc.Findings, name)
				continue
			}
			assert.Equal(t, exitFindings, code, name)
			require.NotEmpty(t, inc.Findings, name)
			h := inc.Findings[0]
			assert.Equal(t, string(analysis.KindHang), h.Kind, "%s: the hang first\n%s", name, text)
			assert.Equal(t, tc.culprits, h.Ranks, name)
			assert.Equal(t, "nccl:all_to_all", h.Collective, name)
			assert.Equal(t, "EXPERT_MODEL_PARALLEL_GROUP", h.PGDesc, name)
			head := strings.Join(strings.SplitN(text, "\n", 4)[:3], "\n")
			assert.Contains(t, head, frdumptest.MoEStuckSizes, "%s: the first three lines\n%s", name, head)
		}
	}
}
