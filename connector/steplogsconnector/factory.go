package steplogsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector/internal/metadata"
)

// NewFactory creates the factory of the steplogs connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(metadata.Type, createDefaultConfig,
		connector.WithLogsToTraces(createLogsToTraces, metadata.LogsToTracesStability))
}

func createDefaultConfig() component.Config { return &Config{} }

func createLogsToTraces(_ context.Context, _ connector.Settings, _ component.Config, next consumer.Traces) (connector.Logs, error) {
	return &stepLogs{next: next}, nil
}
