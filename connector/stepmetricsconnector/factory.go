package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"
)

var errConfigNotStepMetrics = errors.New("stepmetricsconnector: creating the connector: config is not a *stepmetricsconnector.Config")

// NewFactory creates the factory of the stepmetrics connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(metadata.Type, createDefaultConfig,
		connector.WithTracesToMetrics(createTracesToMetrics, metadata.TracesToMetricsStability))
}

// defaultBuckets suit steps of 0.1 s to 60 s, finest around the 1-10 s
// typical of large jobs.
var defaultBuckets = []time.Duration{
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond,
	time.Second, 1500 * time.Millisecond, 2 * time.Second, 3 * time.Second, 4 * time.Second,
	5 * time.Second, 7500 * time.Millisecond, 10 * time.Second, 15 * time.Second, 20 * time.Second,
	30 * time.Second, 45 * time.Second, 60 * time.Second,
}

func createDefaultConfig() component.Config {
	return &Config{
		Interval:     10 * time.Second,
		StepTimeout:  30 * time.Second,
		JobExpiry:    15 * time.Minute,
		MaxJobs:      1024,
		MaxOpenSteps: 32,
		MaxRanks:     65536,
		Buckets:      append([]time.Duration(nil), defaultBuckets...),
	}
}

func createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotStepMetrics
	}
	return newStepMetrics(c, set, next)
}
