package metadata

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestType(t *testing.T) {
	assert.Equal(t, "stepmetrics", Type.String())
	assert.Equal(t, "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector", ScopeName)
}

func TestTelemetryBuilder(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	b, err := NewTelemetryBuilder(tel.NewTelemetrySettings())
	require.NoError(t, err)
	b.StepmetricsSpansDropped.Add(context.Background(), 2)
	b.StepmetricsAttributesSkipped.Add(context.Background(), 1)
	b.StepmetricsStepsClosed.Add(context.Background(), 3)
	for _, name := range []string{"otelcol_stepmetrics_spans_dropped", "otelcol_stepmetrics_attributes_skipped", "otelcol_stepmetrics_steps_closed"} {
		m, err := tel.GetMetric(name)
		require.NoError(t, err, name)
		assert.Equal(t, name, m.Name)
	}
}
