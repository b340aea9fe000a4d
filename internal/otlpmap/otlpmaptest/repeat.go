// Package otlpmaptest builds OTLP data with repeated keys, as a sender can
// put them on the wire, for tests: pdata's Put* methods replace an entry
// of the same key, so a repeated entry is put under a placeholder (Repeat)
// that Logs, Traces, Metrics or Map turn back into the key through an
// OTLP/JSON round trip, which keeps both entries as the OTLP receivers do.
package otlpmaptest // import "github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"

import (
	"fmt"
	"regexp"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

var next atomic.Uint64

// placeholder matches what Repeat puts before a key.
var placeholder = regexp.MustCompile(`__otlpmaptest_repeat_[0-9]+__`)

// Repeat returns a key under which a Put adds another entry of key to a
// map (after the round trip of Logs, Traces, Metrics or Map), however many
// entries of key the map has.
func Repeat(key string) string {
	return fmt.Sprintf("__otlpmaptest_repeat_%d__%s", next.Add(1), key)
}

func resolve(b []byte) []byte { return placeholder.ReplaceAll(b, nil) }

// Logs returns ld with every Repeat key made its key (ld is not changed).
func Logs(ld plog.Logs) plog.Logs {
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalJSON()
	if err != nil {
		panic(err)
	}
	req := plogotlp.NewExportRequest()
	if err := req.UnmarshalJSON(resolve(b)); err != nil {
		panic(err)
	}
	return req.Logs()
}

// Traces returns td with every Repeat key made its key.
func Traces(td ptrace.Traces) ptrace.Traces {
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		panic(err)
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalJSON(resolve(b)); err != nil {
		panic(err)
	}
	return req.Traces()
}

// Metrics returns md with every Repeat key made its key.
func Metrics(md pmetric.Metrics) pmetric.Metrics {
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()
	if err != nil {
		panic(err)
	}
	req := pmetricotlp.NewExportRequest()
	if err := req.UnmarshalJSON(resolve(b)); err != nil {
		panic(err)
	}
	return req.Metrics()
}

// Map returns the map build fills, with every Repeat key made its key.
func Map(build func(m pcommon.Map)) pcommon.Map {
	ld := plog.NewLogs()
	build(ld.ResourceLogs().AppendEmpty().Resource().Attributes())
	out := pcommon.NewMap()
	Logs(ld).ResourceLogs().At(0).Resource().Attributes().MoveTo(out)
	return out
}
