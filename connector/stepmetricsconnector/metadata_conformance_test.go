package stepmetricsconnector

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
)

// metadata.yaml against the factory, the ocb manifests, the metrics of a
// job (newJobMetrics is the one place they are defined) and the telemetry
// builder.
func TestMetadataConformance(t *testing.T) {
	metadatatest.Check(t, metadatatest.Component{
		Factory: NewFactory(),
		Metrics: func(*testing.T) []pmetric.Metrics {
			md := pmetric.NewMetrics()
			(&stepMetrics{}).newJobMetrics(md, "job")
			return []pmetric.Metrics{md}
		},
		Telemetry: func(t *testing.T, set component.TelemetrySettings) {
			tb, err := metadata.NewTelemetryBuilder(set)
			require.NoError(t, err)
			metadatatest.RecordAll(t, tb)
		},
	})
}
