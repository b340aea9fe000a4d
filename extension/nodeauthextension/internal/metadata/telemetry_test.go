package metadata

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestTelemetryBuilder(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })

	tb, err := NewTelemetryBuilder(tt.NewTelemetrySettings())
	require.NoError(t, err)
	defer tb.Shutdown()

	ctx := context.Background()
	tb.NodeauthRefused.Add(ctx, 2, metric.WithAttributeSet(attribute.NewSet(attribute.String(TelemetryAttrReason, ReasonUnknownToken))))
	tb.NodeauthReviews.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(TelemetryAttrResult, ResultAuthenticated))))
	tb.NodeauthTokensFileReloads.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(TelemetryAttrResult, ResultInvalid))))

	for name, want := range map[string]struct {
		unit, attr, value string
		n                 int64
	}{
		"otelcol_nodeauth_refused":             {"{request}", TelemetryAttrReason, ReasonUnknownToken, 2},
		"otelcol_nodeauth_reviews":             {"{review}", TelemetryAttrResult, ResultAuthenticated, 1},
		"otelcol_nodeauth_tokens_file_reloads": {"{reload}", TelemetryAttrResult, ResultInvalid, 1},
	} {
		m, err := tt.GetMetric(name)
		require.NoError(t, err, name)
		assert.Equal(t, want.unit, m.Unit, name)
		sum, ok := m.Data.(metricdata.Sum[int64])
		require.True(t, ok, name)
		require.Len(t, sum.DataPoints, 1, name)
		assert.Equal(t, want.n, sum.DataPoints[0].Value, name)
		v, ok := sum.DataPoints[0].Attributes.Value(attribute.Key(want.attr))
		require.True(t, ok, name)
		assert.Equal(t, want.value, v.AsString(), name)
	}
}
