package provenanceprocessor

import (
	"context"
	"flag"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// The attacks of issue 18, sent to node-a's OTLP port: an XID 79 record,
// a growing volatile DBE counter and a slow rank 3 of an 8-rank job, each
// claiming node-victim and its GPU. The goldens show what leaves the
// processor: everything names node-a, the claims only under forged.
func TestGoldenAttackOnAnotherNode(t *testing.T) {
	h := newHarness(t, true)

	lp, lsink := h.logsProcessor(t)
	require.NoError(t, lp.ConsumeLogs(context.Background(), xidLogs(victim, victimGPU)))
	path := filepath.Join("testdata", "golden", "xid79_victim_logs.yaml")
	if *update {
		require.NoError(t, golden.WriteLogs(t, path, lsink.AllLogs()[0]))
	}
	wantLogs, err := golden.ReadLogs(path)
	require.NoError(t, err)
	require.NoError(t, plogtest.CompareLogs(wantLogs, lsink.AllLogs()[0]))

	mp, msink := h.metrics(t)
	require.NoError(t, mp.ConsumeMetrics(context.Background(), dbeMetrics(victim, victimGPU)))
	path = filepath.Join("testdata", "golden", "dbe_victim_metrics.yaml")
	if *update {
		require.NoError(t, golden.WriteMetrics(t, path, msink.AllMetrics()[0]))
	}
	wantMetrics, err := golden.ReadMetrics(path)
	require.NoError(t, err)
	require.NoError(t, pmetrictest.CompareMetrics(wantMetrics, msink.AllMetrics()[0], pmetrictest.IgnoreTimestamp(), pmetrictest.IgnoreStartTimestamp()))

	tp, tsink := h.traces(t)
	require.NoError(t, tp.ConsumeTraces(context.Background(), stepTraces(victim, victimGPU)))
	path = filepath.Join("testdata", "golden", "slow_rank3_victim_traces.yaml")
	if *update {
		require.NoError(t, golden.WriteTraces(t, path, tsink.AllTraces()[0]))
	}
	wantTraces, err := golden.ReadTraces(path)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(wantTraces, tsink.AllTraces()[0]))

	// Logs: host, uuid, event name + 4 attributes. Metrics: host, uuid,
	// name + 2 points. Traces: rank 3's host, 8 foreign uuids.
	assert.Equal(t, map[string]int64{"host_name": 3, "gpu": 10, "hardware_signal": 8}, h.rejected(t))
}
