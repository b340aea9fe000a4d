package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

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

// Reasons an input is refused: the reason attribute of
// otelcol_ncclflight_bad_inputs, and part of the log line.
const (
	reasonTooLarge    = "too_large"   // a dump over flight_recorder::max_file_size
	reasonUnreadable  = "unreadable"  // a dump that cannot be read
	reasonUndecodable = "undecodable" // a dump that is not a flight recorder dump
	reasonOverBudget  = "over_budget" // a dump whose decoding would exceed its own memory budget or the entry cap
	// reasonOverDecodeBudget: a dump that does not fit in what the decode
	// budget has free (budget.go).
	reasonOverDecodeBudget = "over_decode_budget"
	reasonPoisoned         = "poisoned"         // a dump of a batch the previous run died reading
	reasonUnavailable      = "unavailable"      // the RAS service did not answer
	reasonNoPatternMatch   = "no_pattern_match" // a dump directory where no file matches the patterns
	reasonMalformedLine    = "malformed_line"   // an inspector line that does not parse
	reasonOverlongLine     = "overlong_line"    // an inspector line over the line cap
)

// maxLoggedRejections bounds the inputs remembered as logged; refusals
// beyond it are only summarized.
const maxLoggedRejections = 4096

// rejections logs refused inputs so that the collector's log sampling,
// which drops repeats of one message within a tick, cannot hide any: the
// first refusal of each input, reason and file is logged at WARN with a
// message naming the file and the reason (a message of its own); repeats
// are counted and logged as one periodic summary, counts per reason.
type rejections struct {
	mu      sync.Mutex
	logger  *zap.Logger
	logged  map[string]bool
	repeats map[string]int64 // "input/reason" → refusals not logged since the last summary
}

func newRejections(logger *zap.Logger) *rejections {
	return &rejections{logger: logger, logged: map[string]bool{}, repeats: map[string]int64{}}
}

// add logs the first refusal of name for reason; what says what happened.
func (j *rejections) add(input, reason, name, what string, fields ...zap.Field) {
	j.mu.Lock()
	defer j.mu.Unlock()
	key := input + "|" + reason + "|" + name
	if j.logged[key] || len(j.logged) >= maxLoggedRejections {
		j.repeats[input+"/"+reason]++
		return
	}
	j.logged[key] = true
	fields = append([]zap.Field{zap.String("input", input), zap.String("reason", reason)}, fields...)
	j.logger.Warn(fmt.Sprintf("ncclflightreceiver: %s: %s (%s)", what, name, reason), fields...)
}

// count adds n refusals logged elsewhere (or not at all) to the summary.
func (j *rejections) count(input, reason string, n int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.repeats[input+"/"+reason] += n
}

// summarize logs, in one line, the refusals not logged one by one since
// the last summary.
func (j *rejections) summarize() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.repeats) == 0 {
		return
	}
	keys := make([]string, 0, len(j.repeats))
	var total int64
	for k, n := range j.repeats {
		keys = append(keys, k)
		total += n
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + strconv.FormatInt(j.repeats[k], 10)
	}
	j.logger.Warn(fmt.Sprintf("ncclflightreceiver: %d more inputs refused since the last summary (%s); the first of each file and reason was logged in full",
		total, strings.Join(parts, ", ")), zap.Int64("refused", total))
	clear(j.repeats)
}
