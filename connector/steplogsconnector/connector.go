package steplogsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

const (
	stepSpanName   = "train.step"
	attrDurationNs = "duration_ns"
)

// Config of the steplogs connector: nothing to set.
type Config struct {
	// prevent unkeyed literal initialization
	_ struct{}
}

// NewFactory creates the factory of the steplogs connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(metadata.Type, func() component.Config { return &Config{} },
		connector.WithLogsToTraces(createLogsToTraces, metadata.LogsToTracesStability))
}

func createLogsToTraces(_ context.Context, _ connector.Settings, _ component.Config, next consumer.Traces) (connector.Logs, error) {
	return &stepLogs{next: next}, nil
}

type stepLogs struct {
	component.StartFunc
	component.ShutdownFunc
	next consumer.Traces
}

func (c *stepLogs) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// ConsumeLogs sends one train.step span per step record; other records are
// not steps and yield nothing (they still travel their own logs pipeline).
func (c *stepLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	td := toSpans(ld)
	if td.SpanCount() == 0 {
		return nil
	}
	return c.next.ConsumeTraces(ctx, td)
}

// toSpans converts step records. The record's time is the step's start
// (docs/training-scripts.md) and duration_ns its length; every other
// attribute is kept as it is, and so are the record's ids when the script
// set them. The stepspan processor gives the contract's ids regardless.
func toSpans(ld plog.Logs) ptrace.Traces {
	td := ptrace.NewTraces()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		var spans ptrace.SpanSlice
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				step, okStep := lr.Attributes().Get(semconv.AttrIterationStep)
				dur, okDur := lr.Attributes().Get(attrDurationNs)
				if !okStep || !okDur || step.Type() != pcommon.ValueTypeInt || dur.Type() != pcommon.ValueTypeInt || dur.Int() < 0 {
					continue
				}
				if spans == (ptrace.SpanSlice{}) {
					rs := td.ResourceSpans().AppendEmpty()
					rl.Resource().CopyTo(rs.Resource())
					ss := rs.ScopeSpans().AppendEmpty()
					ss.Scope().SetName(metadata.ScopeName)
					spans = ss.Spans()
				}
				start := lr.Timestamp()
				if start == 0 {
					// Only the time it was seen: take that as the end.
					start = pcommon.NewTimestampFromTime(lr.ObservedTimestamp().AsTime().Add(-time.Duration(dur.Int())))
				}
				span := spans.AppendEmpty()
				span.SetName(stepSpanName)
				span.SetKind(ptrace.SpanKindInternal)
				span.SetTraceID(lr.TraceID())
				span.SetSpanID(lr.SpanID())
				span.SetStartTimestamp(start)
				span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.AsTime().Add(time.Duration(dur.Int()))))
				lr.Attributes().CopyTo(span.Attributes())
				span.Attributes().Remove(attrDurationNs)
				span.Attributes().Remove(semconv.AttrEventName)
			}
		}
	}
	return td
}
