package steplogsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

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

// toSpans converts step records: records with an integer iteration.step and
// a non-negative integer duration_ns (an int or an integral double, as
// steprecord.Int reads integers). The record's time is the step's start
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
				dur, ok := stepDuration(lr.Attributes())
				if !ok {
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
					start = pcommon.NewTimestampFromTime(lr.ObservedTimestamp().AsTime().Add(-dur))
				}
				span := spans.AppendEmpty()
				span.SetName(semconv.SpanTrainStep)
				span.SetKind(ptrace.SpanKindInternal)
				span.SetTraceID(lr.TraceID())
				span.SetSpanID(lr.SpanID())
				span.SetStartTimestamp(start)
				span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.AsTime().Add(dur)))
				lr.Attributes().CopyTo(span.Attributes())
				span.Attributes().Remove(semconv.AttrDurationNs)
				span.Attributes().Remove(semconv.AttrEventName)
			}
		}
	}
	return td
}

// stepDuration is a step record's duration_ns, when the record is one: it
// has an integer iteration.step and a non-negative integer duration_ns.
func stepDuration(attrs pcommon.Map) (time.Duration, bool) {
	step, okStep := attrs.Get(semconv.AttrIterationStep)
	dur, okDur := attrs.Get(semconv.AttrDurationNs)
	if !okStep || !okDur {
		return 0, false
	}
	if _, ok := steprecord.Int(step); !ok {
		return 0, false
	}
	ns, ok := steprecord.Int(dur)
	if !ok || ns < 0 {
		return 0, false
	}
	return time.Duration(ns), true
}
