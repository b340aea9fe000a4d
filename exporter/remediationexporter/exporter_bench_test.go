package remediationexporter

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// BenchmarkRecordToQuarantine measures a fault record handed to ConsumeLogs
// → the platform's Quarantine called, over 100 DBE faults on 100 nodes, with
// the in-memory platform (so it is the exporter's own cost: parse, policy,
// breaker, audit), the audit file on and no webhook. Reports p50/p99.
func BenchmarkRecordToQuarantine(b *testing.B) {
	const faults = 100
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		p := newMemPlatform(1000)
		cfg := createDefaultConfig().(*Config)
		cfg.DryRun = false
		cfg.AuditFile = filepath.Join(b.TempDir(), "audit.jsonl")
		exp, err := newRemediationExporter(cfg, componenttest.NewNopTelemetrySettings(), dependencies{platform: p})
		require.NoError(b, err)
		require.NoError(b, exp.Start(context.Background(), componenttest.NewNopHost()))
		batches := make([]plog.Logs, faults)
		for j := range batches {
			batches[j] = logsOf(semconv.ScopeFaultRecords, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, fmt.Sprintf("node%03d", j), fault.StateOpen))
		}
		starts := make([]time.Time, faults)
		for j := range batches {
			starts[j] = time.Now()
			require.NoError(b, exp.ConsumeLogs(context.Background(), batches[j]))
		}
		require.NoError(b, exp.Shutdown(context.Background()))
		require.Len(b, p.calledAt, faults)
		for j := range starts {
			lat = append(lat, p.calledAt[j].Sub(starts[j]))
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_µs")
}
