package stepspanprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor/internal/metadata"
)

var errConfigNotStepSpan = errors.New("stepspanprocessor: config is not a *stepspanprocessor.Config")

// NewFactory creates the factory of the stepspan processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		CollectiveWait:        5 * time.Second,
		OrphanAfter:           30 * time.Second,
		MaxOpenSteps:          4096,
		MaxCollectivesPerRank: 4096,
		MaxCollectives:        16384,
		MaxRanks:              1024,
		AnomalyFactor:         3,
		MaxAttributeBytes:     4096,
		HealthWindow:          time.Minute,
	}
}

func createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotStepSpan
	}
	return newStepSpanProcessor(c, set, next)
}
