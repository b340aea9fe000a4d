package faultcorrelatorconnector

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// The fault records of deterministic inputs, whole: every attribute, the
// body, the times and the scope the remediation exporter selects on. A
// change of the record's wire form shows here (regenerate with
// `go test -run TestFaultRecordsGolden -update`, and review the diff).
func TestFaultRecordsGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		mode func(*Config)
		feed func(t *testing.T, c *correlator, clock *fakeClock) time.Time // returns when to evaluate
	}{
		{
			file: "xid48_logs.yaml",
			feed: func(t *testing.T, c *correlator, clock *fakeClock) time.Time {
				require.NoError(t, c.ConsumeLogs(context.Background(), xidLogs(48, t0)))
				return t0.Add(5 * time.Second)
			},
		},
		{
			// A volatile DBE count above zero on the agent's first scrape:
			// a P1 DBE fault marked present at start, its onset the
			// counter's start.
			file: "dbe_present_at_start_logs.yaml",
			feed: func(t *testing.T, c *correlator, clock *fakeClock) time.Time {
				s := healthy(agentStart.Add(15*time.Second), agentStart)
				s.dbe = 2
				require.NoError(t, c.ConsumeMetrics(context.Background(), s.metrics()))
				return s.at.Add(time.Second)
			},
		},
		{
			// A rank's compute-straggler verdict and its GPU's NVLink CRC
			// growth: the straggler fault on the rank, NVLink degradation on
			// the GPU. The spans arrive half a second after they end: the
			// gateway places them at their arrival, and the evidence of the
			// verdict keeps both times (time, observed_at).
			file: "straggler_nvlink_logs.yaml",
			mode: gateway,
			feed: func(t *testing.T, c *correlator, clock *fakeClock) time.Time {
				ctx := context.Background()
				clock.at = t0.Add(500 * time.Millisecond)
				require.NoError(t, c.ConsumeTraces(ctx, spans(rankSpan{host: testHost, gpu: testGPU, rank: 1045, end: t0})))
				require.NoError(t, c.ConsumeMetrics(ctx, dcgm(testHost, t0, dcgmGPU{uuid: testGPU, crc: 1000, tempC: 70})))
				require.NoError(t, c.ConsumeMetrics(ctx, dcgm(testHost, t0.Add(10*time.Second), dcgmGPU{uuid: testGPU, crc: 1340, tempC: 71})))
				clock.at = t0.Add(12*time.Second + 500*time.Millisecond)
				require.NoError(t, c.ConsumeTraces(ctx, verdict(1045, testHost, testGPU, "straggler.compute", t0.Add(12*time.Second))))
				return t0.Add(13 * time.Second)
			},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c, sink, clock := newTestCorrelator(t, tc.mode)
			clock.at = tc.feed(t, c, clock)
			require.NoError(t, c.evaluate(context.Background()))
			require.Len(t, sink.AllLogs(), 1, "one evaluation, one batch of records")
			actual := sink.AllLogs()[0]

			path := filepath.Join("testdata", "golden", tc.file)
			if *update {
				require.NoError(t, golden.WriteLogs(t, path, actual))
			}
			expected, err := golden.ReadLogs(path)
			require.NoError(t, err)
			require.NoError(t, plogtest.CompareLogs(expected, actual))
			requireRecordsDecode(t, expected)
		})
	}
}

// requireRecordsDecode checks that each record of the golden file reads
// back as a fault record: the file is a valid example for the readers too.
func requireRecordsDecode(t *testing.T, ld plog.Logs) {
	t.Helper()
	rls := ld.ResourceLogs()
	require.Positive(t, rls.Len())
	for i := 0; i < rls.Len(); i++ {
		// One record per resource, which holds its fault.id (the Kafka key).
		lrs := rls.At(i).ScopeLogs().At(0).LogRecords()
		require.Equal(t, 1, lrs.Len())
		r, err := fault.FromLogRecord(lrs.At(0))
		require.NoError(t, err)
		id, ok := rls.At(i).Resource().Attributes().Get(fault.AttrID)
		require.True(t, ok)
		require.Equal(t, r.ID, id.Str())
	}
}
