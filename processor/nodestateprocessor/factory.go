package nodestateprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor/internal/metadata"
)

var errConfigNotNodeState = errors.New("nodestateprocessor: config is not a *nodestateprocessor.Config")

// defaultExtension is the id of the extension when the config names none.
var defaultExtension = component.MustNewID("nodestate")

// NewFactory creates the factory of the nodestate processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
		processor.WithLogs(createLogs, metadata.LogsStability))
}

func createDefaultConfig() component.Config {
	return &Config{Extension: defaultExtension}
}

func createMetrics(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotNodeState
	}
	return &metricsProcessor{base: newBase(c, set), next: next}, nil
}

func createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotNodeState
	}
	return &logsProcessor{base: newBase(c, set), next: next}, nil
}
