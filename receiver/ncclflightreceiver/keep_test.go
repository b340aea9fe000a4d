package ncclflightreceiver

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// Every rank of a hung MoE job dumped as a pickle (_dump_<rank>, with
// stacks) and as JSON (_dump_<rank>.json, none), the JSON written later:
// the hang still quotes each culprit's stack.
func TestPickleKeptOverJSONOfTheSameMoment(t *testing.T) {
	dir := t.TempDir()
	for rank, d := range frdumptest.MegatronMoE(frdumptest.MoEConfig{Scenario: frdumptest.MoEGPUError, Seed: 1}) {
		js, err := frdumptest.JSON(d)
		require.NoError(t, err)
		for i, f := range []struct {
			name string
			data []byte
		}{{frdumptest.MoEFileName(rank), frdumptest.Pickle(d)}, {frdumptest.MoEFileName(rank) + ".json", js}} {
			path := filepath.Join(dir, f.name)
			require.NoError(t, os.WriteFile(path, f.data, 0o644))
			at := time.Unix(0, d.DumpedAtNs).Add(time.Duration(i) * time.Second)
			require.NoError(t, os.Chtimes(path, at, at))
		}
	}
	e := startReceiver(t, fastConfig(dir), &memStorage{data: map[string][]byte{}})
	require.Eventually(t, func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		return len(e.r.latest[dir]) == frdumptest.MoEWorld && len(e.r.state.Dumps) == 2*frdumptest.MoEWorld
	}, 20*time.Second, 10*time.Millisecond)
	e.stop(t)
	var hang bool
	for _, lr := range findings(e.logs.AllLogs()) {
		if attrStr(lr, semconv.AttrNCCLFinding) != string(analysis.KindHang) {
			continue
		}
		hang = true
		ev, ok := lr.Attributes().Get(semconv.AttrNCCLEvidence)
		require.True(t, ok)
		for _, r := range []int{4, 5} {
			st, ok := ev.Map().Get("rank." + strconv.Itoa(r) + "." + analysis.EvidencePythonStack)
			require.True(t, ok, "rank %d", r)
			assert.Contains(t, st.Str(), "megatron/", "rank %d", r)
		}
	}
	assert.True(t, hang)
}

func TestKeptRecords(t *testing.T) {
	d := frdumptest.MegatronMoE(frdumptest.MoEConfig{Scenario: frdumptest.MoEGILHang})[4]
	withStacks := analysis.Compact(4, d)
	require.NotEmpty(t, withStacks.NewestStack)
	for i := range d.Entries {
		d.Entries[i].Frames = nil
	}
	noStacks := analysis.Compact(4, d)
	assert.Same(t, withStacks, keptRecords(withStacks, noStacks), "the same moment: the pickle stays")
	assert.Same(t, withStacks, keptRecords(noStacks, withStacks))
	assert.Same(t, noStacks, keptRecords(nil, noStacks))

	// A later dump of the stuck rank: one more pg_status change, the same
	// newest operation: its stack is kept.
	later := *noStacks
	later.PGStatus = map[string]frdump.PGStatus{}
	got := keptRecords(withStacks, &later)
	assert.NotSame(t, withStacks, got)
	assert.Equal(t, withStacks.NewestStack, got.NewestStack)
	assert.Empty(t, later.NewestStack, "the record read is not changed")

	// A newer operation: its own (absent) stack, not the old one.
	newer := *noStacks
	newer.Ops = append(append([]analysis.Op(nil), noStacks.Ops...), noStacks.Ops[len(noStacks.Ops)-1])
	newer.Ops[len(newer.Ops)-1].RecordID++
	assert.Empty(t, keptRecords(withStacks, &newer).NewestStack)
}

// A hang reported with fewer culprits (an analysis before a culprit's dump
// came) does not hide the later analysis of the same stuck collective with
// more: the culprits are part of what a hang is reported once per; other
// findings are reported once per process group, sequence and kind.
func TestReportKeyOfAHangHoldsItsCulprits(t *testing.T) {
	first := analysis.Finding{Kind: analysis.KindHang, PGName: "72", Seq: 45265, Ranks: []int{14}}
	later := analysis.Finding{Kind: analysis.KindHang, PGName: "72", Seq: 45265, Ranks: []int{14, 9}}
	again := analysis.Finding{Kind: analysis.KindHang, PGName: "72", Seq: 45265, Ranks: []int{9, 14}}
	assert.NotEqual(t, reportKey(&first), reportKey(&later))
	assert.Equal(t, reportKey(&later), reportKey(&again), "the same culprits in any order: one report")
	behind := analysis.Finding{Kind: analysis.KindPGStatusDivergence, PGName: "72", Seq: 5, Ranks: []int{1}}
	moreBehind := analysis.Finding{Kind: analysis.KindPGStatusDivergence, PGName: "72", Seq: 5, Ranks: []int{1, 2}}
	assert.Equal(t, reportKey(&behind), reportKey(&moreBehind))
}
