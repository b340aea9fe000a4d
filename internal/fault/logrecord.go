package fault

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Attribute names of a fault record (docs/fault-record.md).
const (
	AttrID          = "fault.id"
	AttrType        = "fault.type"
	AttrState       = "fault.state"
	AttrSeverity    = "fault.severity"
	AttrConfidence  = "fault.confidence"
	AttrRule        = "fault.rule"
	AttrAction      = "fault.action"
	AttrBlastRadius = "fault.blast_radius"
	AttrEntity      = "fault.entity"
	AttrFirstSeen   = "fault.first_seen"
	AttrLastSeen    = "fault.last_seen"
	AttrEvidence    = "fault.evidence"
	// AttrPresentAtStart is true on the records of a fault that the first
	// reading of its series already showed (Record.PresentAtStart); absent
	// otherwise.
	AttrPresentAtStart = "fault.present_at_start"

	// Keys inside each fault.evidence map.
	EvidenceSignal = "signal"
	EvidenceValue  = "value"
	EvidenceText   = "text"
	EvidenceTime   = "time"
	// EvidenceObservedAt is Evidence.ObservedAt, present only when set
	// (records written before it existed read back without it).
	EvidenceObservedAt = "observed_at"
	EvidenceTraceID    = "trace_id"
	EvidenceSpanID     = "span_id"

	// Shared names (internal/semconv) the record carries.
	AttrHostName      = semconv.AttrHostName
	AttrGPUUUID       = semconv.AttrGPUUUID
	AttrGPUXID        = semconv.AttrGPUXID
	AttrTrainingJobID = semconv.AttrTrainingJobID
	AttrTrainingRank  = semconv.AttrTrainingRank

	// FaultAttrPrefix marks every attribute only the correlator may set.
	FaultAttrPrefix = "fault."
	// EventName is the log record's event name.
	EventName = "gpu.fault"
)

// timeLayout keeps full precision and sorts as text.
const timeLayout = time.RFC3339Nano

// severityNumber maps P1..P4 onto OpenTelemetry log severities so that
// backends without fault.severity still rank records sensibly.
func severityNumber(s Severity) plog.SeverityNumber {
	switch s {
	case SeverityP1:
		return plog.SeverityNumberFatal
	case SeverityP2:
		return plog.SeverityNumberError
	case SeverityP3:
		return plog.SeverityNumberWarn
	default:
		return plog.SeverityNumberInfo
	}
}

// ToLogRecord writes r into lr (whose previous content is replaced).
func (r Record) ToLogRecord(lr plog.LogRecord) {
	plog.NewLogRecord().CopyTo(lr)
	lr.SetEventName(EventName)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(r.LastSeen))
	lr.SetSeverityNumber(severityNumber(r.Severity))
	lr.SetSeverityText(string(r.Severity))
	lr.Body().SetStr(r.Summary)
	// The first evidence from a span links the record to its trace, so a
	// reader goes from the fault to the step in one click.
	for _, ev := range r.Evidence {
		if !ev.TraceID.IsEmpty() {
			lr.SetTraceID(ev.TraceID)
			lr.SetSpanID(ev.SpanID)
			break
		}
	}

	a := lr.Attributes()
	a.PutStr(AttrID, r.ID)
	a.PutStr(AttrType, string(r.Type))
	a.PutStr(AttrState, string(r.State))
	a.PutStr(AttrSeverity, string(r.Severity))
	a.PutDouble(AttrConfidence, r.Confidence)
	a.PutStr(AttrRule, r.Rule)
	a.PutStr(AttrAction, string(r.Action))
	a.PutStr(AttrBlastRadius, string(r.BlastRadius))
	a.PutStr(AttrEntity, r.Entity.String())
	a.PutStr(AttrFirstSeen, r.FirstSeen.UTC().Format(timeLayout))
	a.PutStr(AttrLastSeen, r.LastSeen.UTC().Format(timeLayout))
	if r.XID != 0 {
		a.PutInt(AttrGPUXID, int64(r.XID))
	}
	if r.PresentAtStart {
		a.PutBool(AttrPresentAtStart, true)
	}
	putIfSet(a, AttrHostName, r.HostName)
	putIfSet(a, AttrGPUUUID, r.GPUUUID)
	putIfSet(a, AttrTrainingJobID, r.JobID)
	if r.RankKnown {
		a.PutInt(AttrTrainingRank, r.Rank)
	}
	evs := a.PutEmptySlice(AttrEvidence)
	evs.EnsureCapacity(len(r.Evidence))
	for _, ev := range r.Evidence {
		m := evs.AppendEmpty().SetEmptyMap()
		m.PutStr(EvidenceSignal, ev.Signal)
		m.PutDouble(EvidenceValue, ev.Value)
		putIfSet(m, EvidenceText, ev.Text)
		m.PutStr(EvidenceTime, ev.Time.UTC().Format(timeLayout))
		if !ev.ObservedAt.IsZero() {
			m.PutStr(EvidenceObservedAt, ev.ObservedAt.UTC().Format(timeLayout))
		}
		if !ev.TraceID.IsEmpty() {
			m.PutStr(EvidenceTraceID, ev.TraceID.String())
		}
		if !ev.SpanID.IsEmpty() {
			m.PutStr(EvidenceSpanID, ev.SpanID.String())
		}
	}
}

func putIfSet(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}

// FromLogRecord reads a record written by ToLogRecord. It rejects records
// that lack a required attribute or carry an unknown enum value, so that a
// consumer (the remediation exporter) never acts on a malformed record.
func FromLogRecord(lr plog.LogRecord) (Record, error) {
	a := lr.Attributes()
	var r Record
	var err error
	fail := func(attr, format string, args ...any) (Record, error) {
		return Record{}, fmt.Errorf("fault: log record: attribute %q: %s", attr, fmt.Sprintf(format, args...))
	}
	str := func(attr string) (string, bool) {
		v, ok := a.Get(attr)
		if !ok || v.Type() != pcommon.ValueTypeStr || v.Str() == "" {
			return "", false
		}
		return v.Str(), true
	}

	required := []string{AttrID, AttrType, AttrState, AttrSeverity, AttrRule, AttrAction, AttrBlastRadius, AttrEntity, AttrFirstSeen, AttrLastSeen}
	vals := make(map[string]string, len(required))
	for _, k := range required {
		v, ok := str(k)
		if !ok {
			return fail(k, "missing or not a non-empty string")
		}
		vals[k] = v
	}
	r.ID = vals[AttrID]
	if r.Type = Type(vals[AttrType]); !r.Type.Valid() {
		return fail(AttrType, "unknown fault type %q", r.Type)
	}
	if r.State = State(vals[AttrState]); !r.State.Valid() {
		return fail(AttrState, "unknown state %q", r.State)
	}
	if r.Severity = Severity(vals[AttrSeverity]); !r.Severity.Valid() {
		return fail(AttrSeverity, "unknown severity %q", r.Severity)
	}
	r.Rule = vals[AttrRule]
	if r.Action = Action(vals[AttrAction]); !r.Action.Valid() {
		return fail(AttrAction, "unknown action %q", r.Action)
	}
	if r.BlastRadius = BlastRadius(vals[AttrBlastRadius]); !r.BlastRadius.Valid() {
		return fail(AttrBlastRadius, "unknown blast radius %q", r.BlastRadius)
	}
	if r.Entity, err = parseEntity(vals[AttrEntity]); err != nil {
		return fail(AttrEntity, "%v", err)
	}
	if r.FirstSeen, err = time.Parse(timeLayout, vals[AttrFirstSeen]); err != nil {
		return fail(AttrFirstSeen, "%v", err)
	}
	if r.LastSeen, err = time.Parse(timeLayout, vals[AttrLastSeen]); err != nil {
		return fail(AttrLastSeen, "%v", err)
	}

	c, ok := a.Get(AttrConfidence)
	if !ok || c.Type() != pcommon.ValueTypeDouble {
		return fail(AttrConfidence, "missing or not a double")
	}
	if r.Confidence = c.Double(); !(r.Confidence >= 0 && r.Confidence <= 1) {
		return fail(AttrConfidence, "%v outside 0..1", r.Confidence)
	}
	if v, ok := a.Get(AttrGPUXID); ok {
		if v.Type() != pcommon.ValueTypeInt || v.Int() <= 0 || v.Int() > math.MaxInt32 {
			return fail(AttrGPUXID, "not a positive integer")
		}
		r.XID = int(v.Int())
	}
	if v, ok := a.Get(AttrPresentAtStart); ok {
		if v.Type() != pcommon.ValueTypeBool {
			return fail(AttrPresentAtStart, "not a bool")
		}
		r.PresentAtStart = v.Bool()
	}
	r.HostName, _ = str(AttrHostName)
	r.GPUUUID, _ = str(AttrGPUUUID)
	r.JobID, _ = str(AttrTrainingJobID)
	if v, ok := a.Get(AttrTrainingRank); ok {
		if v.Type() != pcommon.ValueTypeInt {
			return fail(AttrTrainingRank, "not an integer")
		}
		r.Rank, r.RankKnown = v.Int(), true
	}
	r.Summary = lr.Body().AsString()

	if v, ok := a.Get(AttrEvidence); ok {
		if v.Type() != pcommon.ValueTypeSlice {
			return fail(AttrEvidence, "not a list")
		}
		s := v.Slice()
		r.Evidence = make([]Evidence, 0, s.Len())
		for i := 0; i < s.Len(); i++ {
			ev, err := parseEvidence(s.At(i))
			if err != nil {
				return fail(AttrEvidence, "item %d: %v", i, err)
			}
			r.Evidence = append(r.Evidence, ev)
		}
	}
	return r, nil
}

func parseEntity(s string) (Entity, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			e := Entity{Kind: EntityKind(s[:i]), Key: s[i+1:]}
			if !e.Kind.Valid() {
				return Entity{}, fmt.Errorf("unknown entity kind %q", e.Kind)
			}
			if e.Key == "" {
				return Entity{}, errors.New("empty entity key")
			}
			return e, nil
		}
	}
	return Entity{}, fmt.Errorf("%q is not kind:key", s)
}

func parseEvidence(v pcommon.Value) (Evidence, error) {
	if v.Type() != pcommon.ValueTypeMap {
		return Evidence{}, errors.New("not a map")
	}
	m := v.Map()
	var ev Evidence
	sig, ok := m.Get(EvidenceSignal)
	if !ok || sig.Type() != pcommon.ValueTypeStr || sig.Str() == "" {
		return Evidence{}, fmt.Errorf("%q missing", EvidenceSignal)
	}
	ev.Signal = sig.Str()
	if val, ok := m.Get(EvidenceValue); ok {
		switch val.Type() {
		case pcommon.ValueTypeDouble:
			ev.Value = val.Double()
		case pcommon.ValueTypeInt:
			ev.Value = float64(val.Int())
		default:
			return Evidence{}, fmt.Errorf("%q not a number", EvidenceValue)
		}
	}
	if t, ok := m.Get(EvidenceText); ok {
		ev.Text = t.AsString()
	}
	tm, ok := m.Get(EvidenceTime)
	if !ok {
		return Evidence{}, fmt.Errorf("%q missing", EvidenceTime)
	}
	var err error
	if ev.Time, err = time.Parse(timeLayout, tm.AsString()); err != nil {
		return Evidence{}, fmt.Errorf("%q: %w", EvidenceTime, err)
	}
	if t, ok := m.Get(EvidenceObservedAt); ok {
		if ev.ObservedAt, err = time.Parse(timeLayout, t.AsString()); err != nil {
			return Evidence{}, fmt.Errorf("%q: %w", EvidenceObservedAt, err)
		}
	}
	if t, ok := m.Get(EvidenceTraceID); ok {
		if ev.TraceID, err = parseHexID16(t.AsString()); err != nil {
			return Evidence{}, fmt.Errorf("%q: %w", EvidenceTraceID, err)
		}
	}
	if s, ok := m.Get(EvidenceSpanID); ok {
		b, err := parseHex(s.AsString(), 8)
		if err != nil {
			return Evidence{}, fmt.Errorf("%q: %w", EvidenceSpanID, err)
		}
		copy(ev.SpanID[:], b)
	}
	return ev, nil
}

func parseHexID16(s string) (pcommon.TraceID, error) {
	var id pcommon.TraceID
	b, err := parseHex(s, 16)
	copy(id[:], b)
	return id, err
}

func parseHex(s string, n int) ([]byte, error) {
	if len(s) != 2*n {
		return nil, fmt.Errorf("want %d hex digits, got %d", 2*n, len(s))
	}
	b := make([]byte, n)
	if _, err := hex.Decode(b, []byte(s)); err != nil {
		return nil, err
	}
	return b, nil
}

// FromLogs parses every log record of ld as a fault record, in order; the
// records that do not parse come back as errors instead.
func FromLogs(ld plog.Logs) ([]Record, []error) {
	var out []Record
	var errs []error
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		sls := ld.ResourceLogs().At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				r, err := FromLogRecord(lrs.At(k))
				if err != nil {
					errs = append(errs, err)
					continue
				}
				out = append(out, r)
			}
		}
	}
	return out, errs
}
