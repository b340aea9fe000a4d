package ncclflightreceiver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

// stragglerGolden is what the receiver emits for the 8-rank straggler job
// (dp8-straggler5-v2.10: rank 5 computes 1.8x slower) on two nodes, xl000
// (ranks 0-3) and xl001 (ranks 4-7). Other components' tests take it as
// their input of collective spans (the stepspan processor's golden test), so
// they need not read this receiver's fixtures.
var stragglerGolden = filepath.Join("testdata", "golden", "dp8-straggler5_traces.yaml")

// The receiver, built by its factory and started on a directory of each
// node's dumps, emits every collective of every rank once, as spans.
func TestGoldenStragglerJobTraces(t *testing.T) {
	actual := ptrace.NewTraces()
	for node := 0; node < 2; node++ {
		dir := t.TempDir()
		for rank := node * 4; rank < node*4+4; rank++ {
			name := "nccl_trace_rank_" + strconv.Itoa(rank)
			data, err := os.ReadFile(filepath.Join("internal", "frdump", "testdata", "dp8-straggler5-v2.10", name))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
		}
		cfg := createDefaultConfig().(*Config)
		cfg.JobID = "dp8-straggler5"
		cfg.HostName = "xl00" + strconv.Itoa(node)
		cfg.FlightRecorder.Directories = []string{dir}
		cfg.FlightRecorder.RescanInterval = 20 * time.Millisecond
		cfg.FlightRecorder.SettleTime = 20 * time.Millisecond

		sink := new(consumertest.TracesSink)
		r, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
		require.Eventually(t, func() bool { return sink.SpanCount() == 4*50 }, 20*time.Second, 10*time.Millisecond)
		require.NoError(t, r.Shutdown(context.Background()))
		for _, td := range sink.AllTraces() {
			td.ResourceSpans().MoveAndAppendTo(actual.ResourceSpans())
		}
	}
	if *update {
		require.NoError(t, golden.WriteTraces(t, stragglerGolden, actual))
	}
	expected, err := golden.ReadTraces(stragglerGolden)
	require.NoError(t, err)
	require.NoError(t, ptracetest.CompareTraces(expected, actual, ptracetest.IgnoreResourceSpansOrder(), ptracetest.IgnoreSpansOrder()))
}
