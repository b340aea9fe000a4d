package faultcorrelatorconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"
)

// metadata.yaml against the factory, the ocb manifests, the faults_open
// gauge, observed once as the connector's callback does, and the counters.
func TestMetadataConformance(t *testing.T) {
	metadatatest.Check(t, metadatatest.Component{
		Factory: NewFactory(),
		Telemetry: func(t *testing.T, set component.TelemetrySettings) {
			meter := set.MeterProvider.Meter(metadata.ScopeName)
			gauge, err := metadata.NewFaultsOpenGauge(meter)
			require.NoError(t, err)
			reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
				o.ObserveInt64(gauge, 1)
				return nil
			}, gauge)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, reg.Unregister()) })
			tb, err := metadata.NewTelemetryBuilder(set)
			require.NoError(t, err)
			metadatatest.RecordAll(t, tb)
		},
	})
}
