package ratelimitprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor/internal/metadata"
)

// noLifecycle: the processors hold no goroutines or resources.
type noLifecycle struct{}

func (noLifecycle) Start(context.Context, component.Host) error { return nil }
func (noLifecycle) Shutdown(context.Context) error              { return nil }

// tracesProcessor drops spans over their key's budget.
type tracesProcessor struct {
	noLifecycle
	next consumer.Traces
	lim  *limiter // nil: traces disabled, every span passes
}

func newTracesProcessor(cfg *Config, set processor.Settings, next consumer.Traces) (*tracesProcessor, error) {
	p := &tracesProcessor{next: next}
	if !cfg.Traces.Enabled {
		return p, nil
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("ratelimitprocessor: telemetry: %w", err)
	}
	var node *budget
	if n := cfg.Traces.PerNode; n.Enabled {
		node = newBudget(n.Key, n.SpansPerSecond, n.Burst, cfg.MaxKeys)
	}
	p.lim = newLimiter("traces", newBudget(cfg.Traces.Key, cfg.Traces.SpansPerSecond, cfg.Traces.Burst, cfg.MaxKeys),
		node, cfg.Traces.ProtectedReserve, set.Logger, tb)
	return p, nil
}

func (p *tracesProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: p.lim != nil}
}

func (p *tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if p.lim == nil {
		return p.next.ConsumeTraces(ctx, td)
	}
	ps := p.lim.begin(ctx)
	p.lim.mu.Lock()
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		resKey, resHasKey := attrKey(rs.Resource().Attributes(), ps.key.b.keyAttr)
		resNode, resHasNode := "", true
		if p.lim.node != nil {
			resNode, resHasNode = attrKey(rs.Resource().Attributes(), ps.node.b.keyAttr)
		}
		droppedHere := false
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			dropped := false
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				protected := spanClass(sp) != unprotected
				key, node := resKey, resNode
				if !resHasKey {
					key = ps.key.keyOf(ctx, sp.Attributes())
				}
				if !resHasNode {
					node = ps.node.keyOf(ctx, sp.Attributes())
				}
				if p.lim.admit(ps, key, node, protected) {
					if protected {
						ps.protected++
					}
					return false
				}
				dropped = true
				return true
			})
			droppedHere = droppedHere || dropped
			// Containers emptied by drops go; ones that came empty stay.
			return dropped && ss.Spans().Len() == 0
		})
		return droppedHere && rs.ScopeSpans().Len() == 0
	})
	p.lim.mu.Unlock()
	p.lim.finish(ps)
	if ps.dropped > 0 && td.ResourceSpans().Len() == 0 {
		return nil // everything was over budget: nothing to send
	}
	return p.next.ConsumeTraces(ctx, td)
}

// logsProcessor drops low-severity, unprotected log records over their
// key's budget.
type logsProcessor struct {
	noLifecycle
	next        consumer.Logs
	lim         *limiter // nil: logs disabled, every record passes
	maxSeverity plog.SeverityNumber
}

func newLogsProcessor(cfg *Config, set processor.Settings, next consumer.Logs) (*logsProcessor, error) {
	p := &logsProcessor{next: next}
	if !cfg.Logs.Enabled {
		return p, nil
	}
	maxSeverity, ok := cfg.Logs.maxSeverityNumber()
	if !ok {
		return nil, fmt.Errorf("ratelimitprocessor: logs::max_severity: unknown severity %q", cfg.Logs.MaxSeverity)
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("ratelimitprocessor: telemetry: %w", err)
	}
	p.maxSeverity = maxSeverity
	p.lim = newLimiter("logs", newBudget(cfg.Logs.Key, cfg.Logs.RecordsPerSecond, cfg.Logs.Burst, cfg.MaxKeys),
		nil, cfg.Logs.ProtectedReserve, set.Logger, tb)
	return p, nil
}

func (p *logsProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: p.lim != nil}
}

func (p *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if p.lim == nil {
		return p.next.ConsumeLogs(ctx, ld)
	}
	ps := p.lim.begin(ctx)
	p.lim.mu.Lock()
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		resKey, resHasKey := attrKey(rl.Resource().Attributes(), ps.key.b.keyAttr)
		droppedHere := false
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			scopeProtected := protectedScopes[sl.Scope().Name()]
			dropped := false
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				sev := effectiveSeverity(lr)
				c := recordClass(lr)
				if c == trusted {
					ps.protected++
					return false // this collector's own evidence: never charged
				}
				if c == unprotected && (scopeProtected || sev >= plog.SeverityNumberWarn) {
					c = priority
				}
				if c == unprotected && sev > p.maxSeverity {
					return false // above max_severity, below WARN: not limited
				}
				key := resKey
				if !resHasKey {
					key = ps.key.keyOf(ctx, lr.Attributes())
				}
				if p.lim.admit(ps, key, "", c == priority) {
					if c == priority {
						ps.protected++
					}
					return false
				}
				dropped = true
				return true
			})
			droppedHere = droppedHere || dropped
			return dropped && sl.LogRecords().Len() == 0
		})
		return droppedHere && rl.ScopeLogs().Len() == 0
	})
	p.lim.mu.Unlock()
	p.lim.finish(ps)
	if ps.dropped > 0 && ld.ResourceLogs().Len() == 0 {
		return nil
	}
	return p.next.ConsumeLogs(ctx, ld)
}

// metricsProcessor passes metrics on untouched, so one ratelimit entry can
// sit in every pipeline.
type metricsProcessor struct {
	noLifecycle
	next consumer.Metrics
}

func (*metricsProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (p *metricsProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return p.next.ConsumeMetrics(ctx, md)
}
