package ratelimitprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor/internal/metadata"
)

var errConfigNotRateLimit = errors.New("ratelimitprocessor: config is not a *ratelimitprocessor.Config")

// NewFactory creates the factory of the rate limit processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
		processor.WithLogs(createLogs, metadata.LogsStability),
		processor.WithMetrics(createMetrics, metadata.MetricsStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		Traces: TracesConfig{
			Enabled:          true,
			Key:              semconv.AttrTrainingJobID,
			SpansPerSecond:   100_000,
			Burst:            200_000,
			ProtectedReserve: 10_000,
			PerNode: PerNodeConfig{
				Enabled:        true,
				Key:            semconv.AttrHostName,
				SpansPerSecond: 200_000,
				Burst:          400_000,
			},
		},
		Logs: LogsConfig{
			Enabled:          true,
			Key:              semconv.AttrHostName,
			RecordsPerSecond: 200,
			Burst:            1000,
			MaxSeverity:      "INFO",
			ProtectedReserve: 1000,
		},
		MaxKeys: 10_000,
	}
}

func createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotRateLimit
	}
	return newTracesProcessor(c, set, next)
}

func createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotRateLimit
	}
	return newLogsProcessor(c, set, next)
}

func createMetrics(_ context.Context, _ processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	if _, ok := cfg.(*Config); !ok {
		return nil, errConfigNotRateLimit
	}
	return &metricsProcessor{next: next}, nil
}
