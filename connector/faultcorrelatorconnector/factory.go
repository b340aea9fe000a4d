package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/sharedcomponent"
)

var (
	errConfigNotFaultCorrelator = errors.New("faultcorrelator: creating the connector: config is not a *faultcorrelator.Config")
	// errTracesNeedGateway: the connector is an exporter of a traces
	// pipeline in a mode that ignores spans.
	errTracesNeedGateway = errors.New("spans are read only in mode \"gateway\"")
)

// errModeIgnoresTraces says what to change when a mode that ignores spans
// is wired into a traces pipeline.
func errModeIgnoresTraces(mode Mode) error {
	return fmt.Errorf("mode %q ignores spans, yet this connector is an exporter of a traces pipeline (%w): "+
		"set mode: gateway, or remove the connector from the traces pipeline's exporters", mode, errTracesNeedGateway)
}

// NewFactory creates the factory of the faultcorrelator connector. The
// three paths of one config share one correlator (one rule state).
func NewFactory() connector.Factory {
	f := &factory{instances: sharedcomponent.NewMap[*Config, *correlator]()}
	return connector.NewFactory(metadata.Type, createDefaultConfig,
		connector.WithTracesToLogs(f.createTracesToLogs, metadata.TracesToLogsStability),
		connector.WithMetricsToLogs(f.createMetricsToLogs, metadata.MetricsToLogsStability),
		connector.WithLogsToLogs(f.createLogsToLogs, metadata.LogsToLogsStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		Mode:                   ModeAgent,
		EvaluationInterval:     time.Second,
		FaultIDBucket:          5 * time.Minute,
		ResolveAfter:           5 * time.Minute,
		MaxEntities:            100_000,
		MaxSamplesPerSeries:    256,
		MaxOpenFaults:          10_000,
		MaxOpenFaultsPerNode:   64,
		MaxOpenFaultsPerSource: 16,
		IncidentGap:            10 * time.Minute,
	}
}

type factory struct {
	instances *sharedcomponent.Map[*Config, *correlator]
}

// shared is the instance one pipeline gets: the first Start starts the one
// correlator and the first Shutdown stops it (internal/sharedcomponent, as
// contrib's); the consume calls go to it.
type shared struct {
	*sharedcomponent.Component[*Config, *correlator]
}

func (s shared) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false} // forged attributes are renamed on a copy
}

func (s shared) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return s.Inner.ConsumeTraces(ctx, td)
}

func (s shared) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return s.Inner.ConsumeMetrics(ctx, md)
}

func (s shared) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return s.Inner.ConsumeLogs(ctx, ld)
}

func (f *factory) get(set connector.Settings, cfg component.Config, next consumer.Logs) (shared, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return shared{}, errConfigNotFaultCorrelator
	}
	comp, err := f.instances.LoadOrStore(c, func() (*correlator, error) {
		return newCorrelator(c, set, next)
	})
	if err != nil {
		return shared{}, err
	}
	return shared{comp}, nil
}

func (f *factory) createTracesToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errConfigNotFaultCorrelator
	}
	if c.Mode != ModeGateway {
		// Config.Validate cannot see the pipelines; this is the first place
		// that knows the connector is an exporter of a traces pipeline. In
		// agent mode every span would be dropped without a word.
		return nil, fmt.Errorf("%s: %w", set.ID, errModeIgnoresTraces(c.Mode))
	}
	return f.get(set, cfg, next)
}

func (f *factory) createMetricsToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Metrics, error) {
	return f.get(set, cfg, next)
}

func (f *factory) createLogsToLogs(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Logs, error) {
	return f.get(set, cfg, next)
}
