package steplogsconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

func TestStepRecordsBecomeStepSpans(t *testing.T) {
	sink := new(consumertest.TracesSink)
	c, err := NewFactory().CreateLogsToTraces(context.Background(), connectortest.NewNopSettings(metadata.Type), &Config{}, sink)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, c.Shutdown(context.Background())) }()

	begin := time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(semconv.AttrTrainingJobID, "llama-70b")
	rl.Resource().Attributes().PutInt(semconv.AttrTrainingRank, 3)
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	step := lrs.AppendEmpty()
	step.SetTimestamp(pcommon.NewTimestampFromTime(begin)) // the step's start
	step.Attributes().PutStr(semconv.AttrEventName, "train.step")
	step.Attributes().PutInt(semconv.AttrIterationStep, 18231)
	step.Attributes().PutInt("duration_ns", int64(900*time.Millisecond))
	step.Attributes().PutInt("training.phase.forward_ns", 300_000_000)
	step.Attributes().PutDouble("training.loss", 2.5)
	notAStep := lrs.AppendEmpty()
	notAStep.Body().SetStr("epoch 3 done")
	badDuration := lrs.AppendEmpty()
	badDuration.Attributes().PutInt(semconv.AttrIterationStep, 1)
	badDuration.Attributes().PutStr("duration_ns", "soon")

	require.NoError(t, c.ConsumeLogs(context.Background(), ld))
	require.Equal(t, 1, sink.SpanCount(), "only the well-formed step record")
	rs := sink.AllTraces()[0].ResourceSpans().At(0)
	job, _ := rs.Resource().Attributes().Get(semconv.AttrTrainingJobID)
	assert.Equal(t, "llama-70b", job.Str())
	span := rs.ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, "train.step", span.Name())
	assert.Equal(t, begin, span.StartTimestamp().AsTime())
	assert.Equal(t, 900*time.Millisecond, span.EndTimestamp().AsTime().Sub(span.StartTimestamp().AsTime()))
	s, _ := span.Attributes().Get(semconv.AttrIterationStep)
	assert.Equal(t, int64(18231), s.Int())
	_, hasDur := span.Attributes().Get("duration_ns")
	assert.False(t, hasDur, "duration_ns became the span's length")
	loss, _ := span.Attributes().Get("training.loss")
	assert.Equal(t, 2.5, loss.Double())

	// A batch with no step record sends nothing.
	only := plog.NewLogs()
	only.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("hello")
	require.NoError(t, c.ConsumeLogs(context.Background(), only))
	assert.Equal(t, 1, sink.SpanCount())
}

// A JSON-encoding script sends integers as doubles: an integral double is an
// integer (docs/training-scripts.md); a fractional one is not.
func TestStepRecordsWithIntegralDoubles(t *testing.T) {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	ok := lrs.AppendEmpty()
	ok.SetTimestamp(pcommon.NewTimestampFromTime(time.Unix(100, 0)))
	ok.Attributes().PutDouble(semconv.AttrIterationStep, 7)
	ok.Attributes().PutDouble("duration_ns", 5e8)
	fractional := lrs.AppendEmpty()
	fractional.Attributes().PutDouble(semconv.AttrIterationStep, 7.5)
	fractional.Attributes().PutInt("duration_ns", 1)
	negative := lrs.AppendEmpty()
	negative.Attributes().PutInt(semconv.AttrIterationStep, 8)
	negative.Attributes().PutInt("duration_ns", -1)

	td := toSpans(ld)
	require.Equal(t, 1, td.SpanCount())
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, 500*time.Millisecond, span.EndTimestamp().AsTime().Sub(span.StartTimestamp().AsTime()))
}
