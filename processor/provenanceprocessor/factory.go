package provenanceprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

var errConfigNotProvenance = errors.New("provenanceprocessor: config is not a *provenanceprocessor.Config")

// NewFactory creates the factory of the provenance processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability),
		processor.WithLogs(createLogs, metadata.LogsStability),
		processor.WithMetrics(createMetrics, metadata.MetricsStability))
}

func createDefaultConfig() component.Config {
	return &Config{}
}

func create(set processor.Settings, cfg component.Config) (*provenance, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotProvenance
	}
	return newProvenance(c, set)
}

func createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	p, err := create(set, cfg)
	if err != nil {
		return nil, err
	}
	return &tracesProcessor{provenance: p, next: next}, nil
}

func createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := create(set, cfg)
	if err != nil {
		return nil, err
	}
	return &logsProcessor{provenance: p, next: next}, nil
}

func createMetrics(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	p, err := create(set, cfg)
	if err != nil {
		return nil, err
	}
	return &metricsProcessor{provenance: p, next: next}, nil
}
