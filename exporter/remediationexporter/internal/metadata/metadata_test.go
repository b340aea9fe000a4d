package metadata

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestType(t *testing.T) {
	require.Equal(t, "remediation", Type.String())
	require.Equal(t, component.StabilityLevelDevelopment, LogsStability)
	require.Contains(t, ScopeName, "exporter/remediationexporter")
}
