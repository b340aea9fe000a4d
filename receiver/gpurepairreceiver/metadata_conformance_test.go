package gpurepairreceiver

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
)

// metadata.yaml against the factory, the ocb manifests and the telemetry
// builder. The receiver emits no metrics of its own (its records are logs).
func TestMetadataConformance(t *testing.T) {
	metadatatest.Check(t, metadatatest.Component{
		Factory: NewFactory(),
		Telemetry: func(t *testing.T, set component.TelemetrySettings) {
			tb, err := metadata.NewTelemetryBuilder(set)
			require.NoError(t, err)
			metadatatest.RecordAll(t, tb)
		},
	})
}
