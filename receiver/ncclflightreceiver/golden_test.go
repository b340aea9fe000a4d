package ncclflightreceiver

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func parseFixture(t *testing.T, job string, rank int) *frdump.Dump {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("internal", "frdump", "testdata", job, "nccl_trace_rank_"+itoa(rank)))
	require.NoError(t, err)
	d, _, err := frdump.Parse(data)
	require.NoError(t, err)
	return d
}

func itoa(i int) string { return string(rune('0' + i)) }

// Rank 2 of the hung job: completed collectives, then the ones it never
// finished as error spans.
func TestGoldenHangRankTraces(t *testing.T) {
	d := parseFixture(t, "dp4-hang2-v2.4", 2)
	res := rankResource{host: "xl003", job: "llama-70b", rank: 2, worldSize: worldSize(d.PGConfig)}
	actual, spans := newRankTraces(res, "test")
	rk := analysis.Compact(2, d)
	for i := range rk.Ops {
		entrySpan(spans.AppendEmpty(), res, &rk.Ops[i])
	}
	compareTraces(t, "dp4-hang2_rank2_traces.yaml", actual)
}

// The real NCCL inspector lines as spans.
func TestGoldenInspectorTraces(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("internal", "inspector", "testdata", "readme-examples.v4.0.jsonl"))
	require.NoError(t, err)
	res := rankResource{host: "xl003", job: "llama-70b", rank: -1}
	actual, spans := newRankTraces(res, "test")
	for _, line := range splitLines(data) {
		rec, err := inspector.ParseLine(line)
		require.NoError(t, err)
		inspectorSpan(spans.AppendEmpty(), "llama-70b", &rec)
	}
	compareTraces(t, "inspector_traces.yaml", actual)
}

// The hung job's findings as log records.
func TestGoldenHangFindings(t *testing.T) {
	var dumps []analysis.RankDump
	for rank := 0; rank < 4; rank++ {
		dumps = append(dumps, analysis.RankDump{Rank: rank, Dump: parseFixture(t, "dp4-hang2-v2.4", rank)})
	}
	report := analysis.Analyze(dumps, analysis.DefaultOptions())
	var problems []problem
	for _, f := range report.Findings {
		problems = append(problems, analysisProblem(f, "llama-70b|/var/run/torch-fr|"+f.Key().String()))
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].key < problems[j].key })
	require.Len(t, problems, 2)
	actual := problemLogs(problems, "xl003", "llama-70b", "test", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	path := filepath.Join("testdata", "golden", "dp4-hang2_findings.yaml")
	if *update {
		require.NoError(t, golden.WriteLogs(t, path, actual))
	}
	expected, err := golden.ReadLogs(path)
	require.NoError(t, err)
	require.NoError(t, plogtest.CompareLogs(expected, actual, plogtest.IgnoreObservedTimestamp(), plogtest.IgnoreTimestamp()))
}

func compareTraces(t *testing.T, name string, actual ptrace.Traces) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, golden.WriteTraces(t, path, actual))
	}
	expected, err := golden.ReadTraces(path)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(expected, actual, ptracetest.IgnoreSpansOrder()))
}

func splitLines(data []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, b := range data {
		if b == '\n' {
			if i > start {
				out = append(out, data[start:i])
			}
			start = i + 1
		}
	}
	if start < len(data) {
		out = append(out, data[start:])
	}
	return out
}
