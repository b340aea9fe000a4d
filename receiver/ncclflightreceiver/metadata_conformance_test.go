package ncclflightreceiver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

// metadata.yaml against the factory, the ocb manifests, the metrics of one
// series of every kind and the telemetry builder.
func TestMetadataConformance(t *testing.T) {
	metadatatest.Check(t, metadatatest.Component{
		Factory: NewFactory(),
		Metrics: func(t *testing.T) []pmetric.Metrics {
			now := time.Now()
			m := newCollectiveMetrics(now.Add(-time.Minute))
			k := seriesKey{job: "job", attempt: 1, hasAttempt: true, rank: 0, collective: "all_reduce", pg: "default_pg"}
			m.duration(k, time.Millisecond)
			m.bandwidth(k, 100)
			m.notCompleted(k, false)
			m.notCompleted(k, true)
			md, ok := m.build("node-0", "test", now)
			require.True(t, ok)
			return []pmetric.Metrics{md}
		},
		Telemetry: func(t *testing.T, set component.TelemetrySettings) {
			tb, err := metadata.NewTelemetryBuilder(set)
			require.NoError(t, err)
			metadatatest.RecordAll(t, tb)
		},
	})
}
