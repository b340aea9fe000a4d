package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

// problem is one finding, whichever input found it: one log record with
// its evidence, emitted once per key.
type problem struct {
	source   string // flight_recorder | inspector | ras
	kind     string // hang, mismatch, straggler, timeout, missing_ranks, ...
	key      string // deduplication key, the same on every node that finds it
	message  string
	severity plog.SeverityNumber
	// attrs are the evidence: process group, sequence, ranks, values.
	attrs map[string]any
	at    time.Time
}

// problemLogs writes problems as log records on one resource (the node and
// job), in the order given.
func problemLogs(problems []problem, host, job, version string, observed time.Time) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rankResource{host: host, job: job, rank: -1}.putTo(rl.Resource().Attributes())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(metadata.ScopeName)
	sl.Scope().SetVersion(version)
	for _, p := range problems {
		lr := sl.LogRecords().AppendEmpty()
		at := p.at
		if at.IsZero() {
			at = observed
		}
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(observed))
		lr.SetEventName(semconv.EventNCCLFinding)
		lr.SetSeverityNumber(p.severity)
		lr.SetSeverityText(severityText(p.severity))
		lr.Body().SetStr(p.message)
		a := lr.Attributes()
		a.PutStr(semconv.AttrEventName, semconv.EventNCCLFinding)
		a.PutStr(semconv.AttrNCCLSource, p.source)
		a.PutStr(semconv.AttrNCCLFinding, p.kind)
		a.PutStr(semconv.AttrNCCLFindingKey, p.key)
		keys := make([]string, 0, len(p.attrs))
		for k := range p.attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_ = a.PutEmpty(k).FromRaw(p.attrs[k])
		}
	}
	return ld
}

func severityText(s plog.SeverityNumber) string {
	switch {
	case s >= plog.SeverityNumberError:
		return "error"
	case s >= plog.SeverityNumberWarn:
		return "warn"
	default:
		return "info"
	}
}
