package metadatatest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

// fakeBuilder is a TelemetryBuilder as the metadata packages have them.
type fakeBuilder struct {
	ReadErrors metric.Int64Counter
	Up         metric.Int64Gauge
	name       string // not an instrument: skipped
}

func newFakeBuilder(t *testing.T, set component.TelemetrySettings, scope, description string) *fakeBuilder {
	meter := set.MeterProvider.Meter(scope)
	c, err := meter.Int64Counter("otelcol_fake_read_errors", metric.WithDescription(description), metric.WithUnit("{error}"))
	require.NoError(t, err)
	g, err := meter.Int64Gauge("otelcol_fake_up", metric.WithDescription("1 while up."), metric.WithUnit("1"))
	require.NoError(t, err)
	return &fakeBuilder{ReadErrors: c, Up: g, name: "fake"}
}

func TestCheckTelemetry(t *testing.T) {
	md := readFake(t)
	rm := registered(t, func(t *testing.T, set component.TelemetrySettings) {
		RecordAll(t, newFakeBuilder(t, set, "example.com/fakereceiver", "Files that could not be read. [Alpha]"))
	})
	assert.Equal(t, problems{
		"the component registers otelcol_fake_up, which telemetry.metrics (keys without otelcol_) does not list",
	}, checkTelemetry(md, rm))
}

// The stability suffix, the scope and the prefix all count.
func TestCheckTelemetryDifferences(t *testing.T) {
	md := readFake(t)
	md.Telemetry.Metrics["fake_up"] = telemetryDoc{metricDoc: metricDoc{Description: "1 while up.", Gauge: &dataDoc{}}}
	rm := registered(t, func(t *testing.T, set component.TelemetrySettings) {
		RecordAll(t, newFakeBuilder(t, set, "example.com/other", "Files that could not be read."))
	})
	assert.Equal(t, problems{
		`scope_name: metadata.yaml has "example.com/fakereceiver", the code "example.com/other"`,
		`telemetry.metrics.fake_read_errors description: metadata.yaml has "Files that could not be read. [Alpha]", the code "Files that could not be read."`,
	}, checkTelemetry(md, rm))
}

func TestCheckTelemetryNone(t *testing.T) {
	md := readFake(t)
	assert.Equal(t, problems{
		"telemetry.metrics (keys without otelcol_) lists otelcol_fake_read_errors, which the component never registers",
	}, checkTelemetry(md, registered(t, nil)))
}

func TestRecordAllObservable(t *testing.T) {
	rm := registered(t, func(t *testing.T, set component.TelemetrySettings) {
		meter := set.MeterProvider.Meter("example.com/fakereceiver")
		g, err := meter.Int64ObservableGauge("otelcol_fake_open")
		require.NoError(t, err)
		reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(g, 1)
			return nil
		}, g)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, reg.Unregister()) })
	})
	require.Len(t, rm.ScopeMetrics, 1)
	assert.Equal(t, "Gauge", describeInstrument(rm.ScopeMetrics[0].Metrics[0]).Kind)
}
