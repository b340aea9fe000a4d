package metadatatest // import "github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// telemetryPrefix is what the collector's own metrics start with; mdatagen
// leaves it out of metadata.yaml's telemetry keys and adds it in the code.
const telemetryPrefix = "otelcol_"

// registered runs record on a meter provider with a manual reader and
// returns what it collected: the instruments as the SDK registered them.
func registered(t *testing.T, record func(*testing.T, component.TelemetrySettings)) metricdata.ResourceMetrics {
	var rm metricdata.ResourceMetrics
	if record == nil {
		return rm
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { assert.NoError(t, mp.Shutdown(context.Background())) })
	set := componenttest.NewNopTelemetrySettings()
	set.MeterProvider = mp
	record(t, set)
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.NotEmpty(t, rm.ScopeMetrics, "nothing was recorded: does the test record every instrument?")
	return rm
}

// checkTelemetry compares what was registered with metadata.yaml's
// telemetry: names, descriptions (with mdatagen's " [Stability]" suffix),
// units, data types, and the scope (scope_name, where metadata.yaml has
// one).
func checkTelemetry(md *metadata, rm metricdata.ResourceMetrics) problems {
	var ps problems
	actual := map[string]emitted{}
	for _, sm := range rm.ScopeMetrics {
		if md.ScopeName != "" {
			ps.compare("scope_name", "", md.ScopeName, sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			actual[m.Name] = describeInstrument(m)
		}
	}

	documented := make(map[string]telemetryDoc, len(md.Telemetry.Metrics))
	for key, doc := range md.Telemetry.Metrics {
		documented[telemetryPrefix+key] = doc
	}
	compareNames(&ps, "telemetry.metrics (keys without "+telemetryPrefix+")", keys(documented), keys(actual), "registers")
	for _, name := range keys(documented) {
		got, ok := actual[name]
		if !ok {
			continue
		}
		doc := documented[name]
		description := doc.Description
		if level := doc.Stability.Level; level != "" {
			description += " [" + strings.ToUpper(level[:1]) + level[1:] + "]"
		}
		doc.compareTo(&ps, "telemetry.metrics."+strings.TrimPrefix(name, telemetryPrefix), description, got)
	}
	return ps
}

// describeInstrument is describe for the SDK's data model. Temporality is
// left empty: the reader, not the instrument, chooses it.
func describeInstrument(m metricdata.Metrics) emitted {
	e := emitted{Description: m.Description, Unit: m.Unit}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		e.Kind, e.Monotonic = "Sum", d.IsMonotonic
	case metricdata.Sum[float64]:
		e.Kind, e.Monotonic = "Sum", d.IsMonotonic
	case metricdata.Gauge[int64], metricdata.Gauge[float64]:
		e.Kind = "Gauge"
	case metricdata.Histogram[int64], metricdata.Histogram[float64]:
		e.Kind = "Histogram"
	default:
		e.Kind = reflect.TypeOf(m.Data).String()
	}
	return e
}

// RecordAll records one value on every instrument among the exported
// fields of the struct builder points to (a TelemetryBuilder), so each
// shows up in a collection.
func RecordAll(t *testing.T, builder any) {
	t.Helper()
	ctx := context.Background()
	v := reflect.ValueOf(builder)
	require.Equal(t, reflect.Pointer, v.Kind(), "RecordAll wants a pointer to a struct")
	v = v.Elem()
	recorded := 0
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch inst := v.Field(i).Interface().(type) {
		case metric.Int64Counter:
			inst.Add(ctx, 1)
		case metric.Float64Counter:
			inst.Add(ctx, 1)
		case metric.Int64UpDownCounter:
			inst.Add(ctx, 1)
		case metric.Float64UpDownCounter:
			inst.Add(ctx, 1)
		case metric.Int64Gauge:
			inst.Record(ctx, 1)
		case metric.Float64Gauge:
			inst.Record(ctx, 1)
		case metric.Int64Histogram:
			inst.Record(ctx, 1)
		case metric.Float64Histogram:
			inst.Record(ctx, 1)
		default:
			continue
		}
		recorded++
	}
	require.NotZero(t, recorded, "no instrument among the fields of %T", builder)
}
