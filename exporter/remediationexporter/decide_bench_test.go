package remediationexporter

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// BenchmarkDecision is one new fault record through ConsumeLogs (policy,
// in-memory platform, audit file synced per line), without and with the
// decision log on an in-process kfake broker; the difference is the
// decision log's cost per decision: a catch-up (ListOffsets) and a publish
// (acks=all) waited for.
func BenchmarkDecision(b *testing.B) {
	for _, withLog := range []bool{false, true} {
		name := "no_decision_log"
		if withLog {
			name = "decision_log_kfake"
		}
		b.Run(name, func(b *testing.B) {
			cfg := createDefaultConfig().(*Config)
			cfg.DryRun = false
			cfg.AuditFile = filepath.Join(b.TempDir(), "audit.jsonl")
			p := newMemPlatform(1 << 30)
			p.gpuNodes = 1 << 30 // below the quarantine cap throughout
			deps := dependencies{platform: p}
			if withLog {
				withDecisionLog(b, newDecisionCluster(b), "bench")(cfg, &deps)
			}
			exp, err := newRemediationExporter(cfg, componenttest.NewNopTelemetrySettings(), deps)
			require.NoError(b, err)
			require.NoError(b, exp.Start(context.Background(), componenttest.NewNopHost()))
			defer func() { require.NoError(b, exp.Shutdown(context.Background())) }()
			batches := make([]plog.Logs, b.N)
			for i := range batches {
				batches[i] = logsOf(semconv.ScopeFaultRecords,
					faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, fmt.Sprintf("node%06d", i), fault.StateOpen))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range batches {
				if err := exp.ConsumeLogs(context.Background(), batches[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
