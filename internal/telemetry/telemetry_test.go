package telemetry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

const scope = "example.com/fakereceiver"

// collect builds instruments with build on a manual reader and returns
// them by name, as the SDK registered them.
func collect(t *testing.T, build func(component.TelemetrySettings)) map[string]metricdata.Metrics {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	set := componenttest.NewNopTelemetrySettings()
	set.MeterProvider = mp
	build(set)
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, scope, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func TestFullDescription(t *testing.T) {
	i := Instrument{Description: "Files that could not be read."}
	assert.Equal(t, "Files that could not be read.", i.FullDescription())
	i.Stability = component.StabilityLevelAlpha
	assert.Equal(t, "Files that could not be read. [Alpha]", i.FullDescription())
	i.Stability = component.StabilityLevelDevelopment
	assert.Equal(t, "Files that could not be read. [Development]", i.FullDescription())
}

func TestBuilder(t *testing.T) {
	got := collect(t, func(set component.TelemetrySettings) {
		b := NewBuilder(set, scope)
		c := b.Int64Counter(Instrument{Name: "otelcol_fake_errors", Description: "Errors.", Unit: "{error}", Stability: component.StabilityLevelAlpha})
		g := b.Int64Gauge(Instrument{Name: "otelcol_fake_up", Description: "1 while up.", Unit: "1"})
		require.NoError(t, b.Err())
		c.Add(context.Background(), 2)
		g.Record(context.Background(), 1)
	})
	require.Len(t, got, 2)
	errs := got["otelcol_fake_errors"]
	assert.Equal(t, "Errors. [Alpha]", errs.Description)
	assert.Equal(t, "{error}", errs.Unit)
	sum, ok := errs.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	assert.True(t, sum.IsMonotonic)
	assert.Equal(t, int64(2), sum.DataPoints[0].Value)
	up := got["otelcol_fake_up"]
	assert.Equal(t, "1 while up.", up.Description)
	_, ok = up.Data.(metricdata.Gauge[int64])
	assert.True(t, ok)
}

// An invalid name is an error of NewTelemetryBuilder, not a panic: the
// instrument still works (as a no-op where the SDK chooses so).
func TestBuilderErr(t *testing.T) {
	collect(t, func(set component.TelemetrySettings) {
		b := NewBuilder(set, scope)
		c := b.Int64Counter(Instrument{Name: "1 not a name"})
		g := b.Int64Gauge(Instrument{Name: "neither is this!"})
		require.Error(t, b.Err())
		assert.ErrorContains(t, b.Err(), "1 not a name")
		assert.ErrorContains(t, b.Err(), "neither is this!")
		c.Add(context.Background(), 1)
		g.Record(context.Background(), 1)
	})
}

func TestInt64ObservableGauge(t *testing.T) {
	got := collect(t, func(set component.TelemetrySettings) {
		meter := set.MeterProvider.Meter(scope)
		i := Instrument{Name: "otelcol_fake_open", Description: "Open now.", Unit: "{fault}", Stability: component.StabilityLevelDevelopment}
		g, err := i.Int64ObservableGauge(meter)
		require.NoError(t, err)
		reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(g, 3)
			return nil
		}, g)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, reg.Unregister()) })
	})
	open := got["otelcol_fake_open"]
	assert.Equal(t, "Open now. [Development]", open.Description)
	assert.Equal(t, "{fault}", open.Unit)
	gauge, ok := open.Data.(metricdata.Gauge[int64])
	require.True(t, ok)
	assert.Equal(t, int64(3), gauge.DataPoints[0].Value)
}
