package ncclflightreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
)

// The finding records carry the stuck ranks' Python stacks (issue 22): the
// missing_ranks record of the hung fixture quotes, under nccl.evidence, the
// stack of the rank that never joined and of each rank waiting in the
// collective.
func TestFindingRecordsCarryStacks(t *testing.T) {
	var dumps []analysis.RankDump
	for rank := range 4 {
		dumps = append(dumps, analysis.RankDump{Rank: rank, Dump: parseFixture(t, "dp4-hang2-v2.4", rank)})
	}
	report := analysis.Analyze(dumps, analysis.DefaultOptions())
	require.NotEmpty(t, report.Findings)
	f := report.Findings[0]
	require.Equal(t, analysis.KindMissingRanks, f.Kind)
	ld := problemLogs([]problem{analysisProblem(f, "k")}, "xl003", "llama-70b", "test", time.Unix(0, 0))
	lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	ev, ok := lr.Attributes().Get(semconv.AttrNCCLEvidence)
	require.True(t, ok)
	for _, r := range []string{"0", "1", "2", "3"} {
		st, ok := ev.Map().Get("rank." + r + "." + semconv.NCCLEvidencePythonStack)
		require.True(t, ok, "rank %s", r)
		assert.Regexp(t, `^\S+ \(\S+:\d+\)`, st.Str(), "rank %s: name (file:line)", r)
	}
}
