package nodestateprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
)

// base is what the metrics and logs processors share: the extension to
// find at Start and the store found there. Each pipeline has its own
// instance; the state they share is in the extension.
type base struct {
	extension component.ID
	logger    *zap.Logger
	store     nodestate.Store
}

func newBase(cfg *Config, set processor.Settings) base {
	return base{extension: cfg.Extension, logger: set.Logger}
}

// Start finds the nodestate extension. Extensions start before pipelines,
// so it is there when configured.
func (b *base) Start(_ context.Context, host component.Host) error {
	store, err := nodestate.FromHost(host, b.extension)
	if err != nil {
		return fmt.Errorf("nodestateprocessor: start: %w", err)
	}
	b.store = store
	b.logger.Debug("nodestateprocessor: recording into extension", zap.Stringer("extension", b.extension))
	return nil
}

// Shutdown lets go of the store; the extension outlives the pipelines.
func (b *base) Shutdown(context.Context) error {
	b.store = nil
	return nil
}

// Capabilities: the data is only read.
func (b *base) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

type metricsProcessor struct {
	base
	next consumer.Metrics
}

// ConsumeMetrics records the health metrics into the store and passes md on
// unchanged.
func (p *metricsProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if p.store != nil {
		recordMetrics(p.store, md)
	}
	return p.next.ConsumeMetrics(ctx, md)
}

type logsProcessor struct {
	base
	next consumer.Logs
}

// ConsumeLogs records the gpu.xid records into the store and passes ld on
// unchanged.
func (p *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if p.store != nil {
		recordLogs(p.store, ld)
	}
	return p.next.ConsumeLogs(ctx, ld)
}
