package ncclflightreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// writeMoE writes the Megatron MoE job's dumps as torch does under
// TORCH_FR_DUMP_TEMP_FILE=<dir>/_dump_: pickles named _dump_<rank>, each
// file's mtime the moment the rank dumped.
func writeMoE(t *testing.T, cfg frdumptest.MoEConfig) string {
	t.Helper()
	dir := t.TempDir()
	for rank, d := range frdumptest.MegatronMoE(cfg) {
		path := filepath.Join(dir, frdumptest.MoEFileName(rank))
		require.NoError(t, os.WriteFile(path, frdumptest.Pickle(d), 0o644))
		at := time.Unix(0, d.DumpedAtNs)
		require.NoError(t, os.Chtimes(path, at, at))
	}
	return dir
}

// readAll waits until every rank's dump of dir was read, stops the
// receiver, and returns the findings it reported.
func readAll(t *testing.T, dir string) []plog.LogRecord {
	t.Helper()
	e := startReceiver(t, fastConfig(dir), &memStorage{data: map[string][]byte{}}) // default patterns
	require.Eventually(t, func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		return len(e.r.latest[dir]) == frdumptest.MoEWorld
	}, 20*time.Second, 10*time.Millisecond, "_dump_<rank> files are read with the default patterns")
	e.stop(t)
	return findings(e.logs.AllLogs())
}

func TestMoEHealthyDumpsNoFinding(t *testing.T) {
	got := readAll(t, writeMoE(t, frdumptest.MoEConfig{Scenario: frdumptest.MoEHealthy, Seed: 2}))
	for _, lr := range got {
		t.Errorf("finding on the healthy control: %s", lr.Body().Str())
	}
}

func TestMoEHangDumpsOneCulpritFinding(t *testing.T) {
	for _, scenario := range []string{frdumptest.MoEGPUError, frdumptest.MoEGILHang} {
		got := readAll(t, writeMoE(t, frdumptest.MoEConfig{Scenario: scenario, Seed: 1}))
		require.NotEmpty(t, got, scenario)
		assert.LessOrEqual(t, len(got), 3, scenario)
		var hangs []plog.LogRecord
		for _, lr := range got {
			if attrStr(lr, semconv.AttrNCCLFinding) == string(analysis.KindHang) {
				hangs = append(hangs, lr)
			}
		}
		require.Len(t, hangs, 1, scenario)
		h := hangs[0]
		ranks, ok := h.Attributes().Get(semconv.AttrNCCLRanks)
		require.True(t, ok)
		assert.Equal(t, []any{int64(4), int64(5)}, ranks.Slice().AsRaw(), scenario)
		assert.Equal(t, "all_to_all", attrStr(h, semconv.AttrNCCLCollective), scenario)
		assert.Equal(t, "EXPERT_MODEL_PARALLEL_GROUP", attrStr(h, semconv.AttrNCCLPGDesc), scenario)
		ev, ok := h.Attributes().Get(semconv.AttrNCCLEvidence)
		require.True(t, ok)
		stack, ok := ev.Map().Get("rank.4." + analysis.EvidencePythonStack)
		require.True(t, ok, scenario)
		assert.Contains(t, stack.Str(), "megatron/", scenario)
	}
}

// writeMoECopy writes the dumps as an operator's copy leaves them: the
// files' times are the copy's, not the dump moments.
func writeMoECopy(t *testing.T, cfg frdumptest.MoEConfig) string {
	t.Helper()
	dir := t.TempDir()
	for rank, d := range frdumptest.MegatronMoE(cfg) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, frdumptest.MoEFileName(rank)), frdumptest.Pickle(d), 0o644))
	}
	return dir
}

// Generated incidents in the real format (only the operations in flight,
// pg_status by each rank's own group ids) through the receiver, whose dump
// moments are the files' mtimes: those torch left, or a copy's. One record,
// the hang, naming the culprits and the expert all_to_all their peers wait
// in; nothing on the healthy control either way.
func TestMoERealFormatThroughTheReceiver(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		culprits []int
	}{
		{frdumptest.MoEGILHang, []int{9, 13}},
		{frdumptest.MoEGPUError, []int{4, 5}},
		{frdumptest.MoEGPUError, []int{10}},
		{frdumptest.MoEHealthy, nil},
	} {
		cfg := frdumptest.MoEConfig{Scenario: tc.scenario, Culprits: tc.culprits, Seed: 1, OnlyActive: true}
		for moment, dir := range map[string]string{"mtime": writeMoE(t, cfg), "copy": writeMoECopy(t, cfg)} {
			name := tc.scenario + "/" + moment
			got := readAll(t, dir)
			if tc.culprits == nil {
				for _, lr := range got {
					t.Errorf("%s: finding on the healthy control: %s", name, lr.Body().Str())
				}
				continue
			}
			require.Len(t, got, 1, name)
			h := got[0]
			assert.Equal(t, string(analysis.KindHang), attrStr(h, semconv.AttrNCCLFinding), name)
			ranks, ok := h.Attributes().Get(semconv.AttrNCCLRanks)
			require.True(t, ok, name)
			want := make([]any, len(tc.culprits))
			for i, r := range tc.culprits {
				want[i] = int64(r)
			}
			assert.Equal(t, want, ranks.Slice().AsRaw(), name)
			assert.Equal(t, "all_to_all", attrStr(h, semconv.AttrNCCLCollective), name)
			assert.Equal(t, "EXPERT_MODEL_PARALLEL_GROUP", attrStr(h, semconv.AttrNCCLPGDesc), name)
			assert.Contains(t, h.Body().Str(), "nccl:all_to_all "+frdumptest.MoEStuckSizes+" BFloat16", name)
		}
	}
}
