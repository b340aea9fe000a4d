package nodeauthextension

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
)

// metadata.yaml against the factory, the ocb manifests and the telemetry
// builder.
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
