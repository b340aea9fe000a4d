package provenanceprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"
	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

// provenance is one processor instance (one per signal and pipeline): the
// node's name, its GPU inventory and the counter.
type provenance struct {
	cfg    *Config
	logger *zap.Logger
	host   string
	inv    nodestate.Inventory // nil: no nodestate configured, no GPU is known
	tb     *metadata.TelemetryBuilder
	// byReason are the counter's options, one per reason, built once.
	byReason [numReasons]metric.AddOption
	// warned: the first rejection of each reason is logged, once.
	warned [numReasons]atomic.Bool
	// canonWarned: the same for the canonical-form check (canonical.go).
	canonWarned canonicalWarned
	// warnedNoCredential: the same, for bind_to_auth's refusals (bind.go).
	warnedNoCredential atomic.Bool
}

func newProvenance(cfg *Config, set processor.Settings) (*provenance, error) {
	host, err := hostName(cfg)
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("provenanceprocessor: telemetry: %w", err)
	}
	p := &provenance{cfg: cfg, logger: set.Logger, host: host, tb: tb}
	for r := range numReasons {
		p.byReason[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, reasonNames[r])))
	}
	return p, nil
}

// Start finds the GPU inventory.
func (p *provenance) Start(_ context.Context, host component.Host) error {
	if p.cfg.BindToAuth {
		p.startBound()
		return nil
	}
	if p.cfg.NodeState == nil {
		p.logger.Info("provenanceprocessor: no nodestate extension configured: every gpu.uuid and gpu.index an OTLP sender claims is renamed",
			zap.String("host.name", p.host))
		return nil
	}
	inv, err := nodestate.InventoryFromHost(host, *p.cfg.NodeState)
	if err != nil {
		return fmt.Errorf("provenanceprocessor: nodestate: %w", err)
	}
	p.inv = inv
	return nil
}

// Shutdown: nothing to release.
func (p *provenance) Shutdown(context.Context) error { return nil }

// Capabilities: the processor renames in place.
func (p *provenance) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

type tracesProcessor struct {
	*provenance
	next consumer.Traces
}

func (p *tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if goOn, err := p.canonical(ctx, otlpmap.FilterTraces(td), td.SpanCount()); !goOn {
		return err
	}
	w, err := p.walker(ctx)
	if err != nil {
		return err
	}
	w.traces(td)
	w.counts[reasonFault] += fault.StripForgedTraces(td)
	p.record(ctx, &w)
	return p.next.ConsumeTraces(ctx, td)
}

type logsProcessor struct {
	*provenance
	next consumer.Logs
}

func (p *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if goOn, err := p.canonical(ctx, otlpmap.FilterLogs(ld), ld.LogRecordCount()); !goOn {
		return err
	}
	w, err := p.walker(ctx)
	if err != nil {
		return err
	}
	w.logs(ld)
	w.counts[reasonFault] += fault.StripForged(ld)
	p.record(ctx, &w)
	return p.next.ConsumeLogs(ctx, ld)
}

type metricsProcessor struct {
	*provenance
	next consumer.Metrics
}

func (p *metricsProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if goOn, err := p.canonical(ctx, otlpmap.FilterMetrics(md), md.DataPointCount()); !goOn {
		return err
	}
	w, err := p.walker(ctx)
	if err != nil {
		return err
	}
	w.metrics(md)
	w.counts[reasonFault] += fault.StripForgedMetrics(md)
	p.record(ctx, &w)
	return p.next.ConsumeMetrics(ctx, md)
}

// record adds one batch's rejections to the counter and logs the first of
// each reason.
func (p *provenance) record(ctx context.Context, w *walker) {
	for r, n := range w.counts {
		if n == 0 {
			continue
		}
		p.tb.RejectedClaims.Add(ctx, int64(n), p.byReason[r])
		if !p.warned[r].Swap(true) {
			p.logger.Warn("provenanceprocessor: an OTLP sender made claims only this node's own receivers may make; renamed under forged. (logged once per reason, counted in otelcol_processor_provenance_rejected_claims)",
				zap.String("reason", reasonNames[r]), zap.Int("claims", n), zap.String("host.name", w.host),
				zap.String("example", w.example[r]))
		}
	}
}
