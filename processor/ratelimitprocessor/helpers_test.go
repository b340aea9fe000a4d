package ratelimitprocessor

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor/internal/metadata"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is the processors' clock in tests: it moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// harness is a processor's settings with a metric reader and an observed
// logger.
type harness struct {
	set    processor.Settings
	reader *sdkmetric.ManualReader
	logs   *observer.ObservedLogs
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	core, logs := observer.New(zap.InfoLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings.MeterProvider = provider
	set.Logger = zap.New(core)
	return &harness{set: set, reader: reader, logs: logs}
}

// counter sums the data points of the named counter per attribute set,
// written as "signal=traces,key=a" (attributes in the set's order).
func (h *harness) counter(t *testing.T, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is an int64 sum", name)
			require.True(t, sum.IsMonotonic)
			for _, dp := range sum.DataPoints {
				label := ""
				for i, kv := range dp.Attributes.ToSlice() {
					if i > 0 {
						label += ","
					}
					label += string(kv.Key) + "=" + kv.Value.AsString()
				}
				out[label] += dp.Value
			}
		}
	}
	return out
}

// tracesOf builds one resource per job (training.job.id on the resource,
// none when job is "") with n spans each, named job/i.
func tracesOf(jobs map[string]int) ptrace.Traces {
	td := ptrace.NewTraces()
	for job, n := range jobs {
		addJob(td, job, n)
	}
	return td
}

func addJob(td ptrace.Traces, job string, n int) ptrace.SpanSlice {
	rs := td.ResourceSpans().AppendEmpty()
	if job != "" {
		rs.Resource().Attributes().PutStr("training.job.id", job)
	}
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := 0; i < n; i++ {
		sp := spans.AppendEmpty()
		sp.SetName(job + "/" + strconv.Itoa(i))
	}
	return spans
}

// spansByJob counts the spans per resource training.job.id.
func spansByJob(tds []ptrace.Traces) map[string]int {
	out := map[string]int{}
	for _, td := range tds {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			job := ""
			if v, ok := rs.Resource().Attributes().Get("training.job.id"); ok {
				job = v.AsString()
			}
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				out[job] += rs.ScopeSpans().At(j).Spans().Len()
			}
		}
	}
	return out
}

// logsOnHost appends a resource of host (no host.name when "") with one
// scope named scope and returns its record slice.
func logsOnHost(ld plog.Logs, host, scope string) plog.LogRecordSlice {
	rl := ld.ResourceLogs().AppendEmpty()
	if host != "" {
		rl.Resource().Attributes().PutStr("host.name", host)
	}
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(scope)
	return sl.LogRecords()
}

// addRecords appends n records of severity sev with bodies prefix0..
func addRecords(lrs plog.LogRecordSlice, n int, sev plog.SeverityNumber, prefix string) {
	for i := 0; i < n; i++ {
		lr := lrs.AppendEmpty()
		lr.SetSeverityNumber(sev)
		lr.Body().SetStr(prefix + strconv.Itoa(i))
	}
}

// bodies returns every record's body.
func bodies(lds []plog.Logs) []string {
	var out []string
	for _, ld := range lds {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					out = append(out, lrs.At(k).Body().AsString())
				}
			}
		}
	}
	return out
}
