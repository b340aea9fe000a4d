package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/straggler"
)

var errConfigNotStraggler = errors.New("stragglerprocessor: config is not a *stragglerprocessor.Config")

// NewFactory creates the factory of the straggler processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithTraces(createTraces, metadata.TracesStability))
}

func createDefaultConfig() component.Config {
	d, jd := straggler.DefaultOptions(), straggler.DefaultJobOptions()
	return &Config{
		DecisionWait:       3 * time.Second,
		MaxJobs:            256,
		MaxOpenStepsPerJob: 16,
		MaxRanksPerStep:    32768,
		MaxHeldRanks:       1 << 20,
		SlowStepFactor:     3,
		SlowStepWindow:     20,
		Rule:               d.Rule,
		Factor:             d.Factor,
		ZThreshold:         d.ZThreshold,
		MinExcess:          d.MinExcess,
		MinGroupSize:       d.MinGroupSize,
		PersistenceK:       straggler.DefaultK,
		PersistenceN:       straggler.DefaultN,
		MaxSlowShare:       jd.MaxSlowShare,
		CloseExcess:        jd.CloseExcess,
		SelfExcess:         jd.SelfExcess,
		WarmupSteps:        jd.Warmup,
		StageGap:           jd.StageGap,
		ClockSkewWarning:   30 * time.Second,
	}
}

func createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotStraggler
	}
	return newStragglerProcessor(c, set, next)
}
