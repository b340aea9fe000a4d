package metadata

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestType(t *testing.T) {
	require.Equal(t, "ratelimit", Type.String())
}

func TestNewTelemetryBuilder(t *testing.T) {
	tb, err := NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	require.NotNil(t, tb.DroppedItems)
	require.NotNil(t, tb.ProtectedItems)
	require.NotNil(t, tb.EvictedKeys)
}
