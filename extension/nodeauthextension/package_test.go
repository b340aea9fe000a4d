package nodeauthextension

import (
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// nopSettings are the settings the collector passes, with no-op telemetry.
func nopSettings() extension.Settings {
	return extension.Settings{
		ID:                component.NewID(metadata.Type),
		TelemetrySettings: componenttest.NewNopTelemetrySettings(),
		BuildInfo:         component.NewDefaultBuildInfo(),
	}
}
