package otlpmap

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
)

// reference is the check written the obvious way: a set per map, depth
// counted as Map counts it. It says whether v (at depth, 0 for a body) is
// canonical.
func reference(v pcommon.Value, depth int) bool {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		return referenceMap(v.Map(), depth+1)
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		if s.Len() == 0 {
			return true
		}
		if depth+1 > MaxDepth {
			return false
		}
		for i := 0; i < s.Len(); i++ {
			if !reference(s.At(i), depth+1) {
				return false
			}
		}
	}
	return true
}

func referenceMap(m pcommon.Map, depth int) bool {
	if m.Len() == 0 {
		return true
	}
	if depth > MaxDepth {
		return false
	}
	seen := map[string]bool{}
	ok := true
	m.Range(func(k string, v pcommon.Value) bool {
		ok = !seen[k] && reference(v, depth)
		seen[k] = true
		return ok
	})
	return ok
}

func referenceRecord(lr plog.LogRecord) bool {
	if !referenceMap(lr.Attributes(), 1) || !reference(lr.Body(), 0) {
		return false
	}
	if v, ok := lr.Attributes().Get("event.name"); ok && lr.EventName() != "" {
		return v.Type() == pcommon.ValueTypeStr && v.Str() == lr.EventName()
	}
	return true
}

// FuzzFilterLogs: any OTLP logs request, as the agent's receiver decodes
// it. FilterLogs agrees with the reference check: it refuses exactly the
// requests with a non-canonical resource and then changes nothing; else it
// keeps exactly the canonical records of canonical scopes, and counts at
// least every record it removed.
func FuzzFilterLogs(f *testing.F) {
	for _, build := range []func(plog.Logs){issueRecord, func(ld plog.Logs) { stepLog(ld, 1) }} {
		ld := plog.NewLogs()
		build(ld)
		b, err := plogotlp.NewExportRequestFromLogs(reencode(ld)).MarshalProto()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req := plogotlp.NewExportRequest()
		if req.UnmarshalProto(b) != nil {
			return
		}
		ld := req.Logs()
		resourcesOK, keep := true, 0
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			rl := rls.At(i)
			resourcesOK = resourcesOK && referenceMap(rl.Resource().Attributes(), 1)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				sl := rl.ScopeLogs().At(j)
				if !referenceMap(sl.Scope().Attributes(), 1) {
					continue
				}
				for k := 0; k < sl.LogRecords().Len(); k++ {
					if referenceRecord(sl.LogRecords().At(k)) {
						keep++
					}
				}
			}
		}
		before := ld.LogRecordCount()
		r := FilterLogs(ld)
		if r.Refuse != !resourcesOK {
			t.Fatalf("Refuse %v, the reference finds the resources canonical: %v", r.Refuse, resourcesOK)
		}
		if r.Refuse {
			if ld.LogRecordCount() != before || r.Refused() < max(before, 1) {
				t.Fatalf("a refused request lost records (%d of %d) or counted %d", ld.LogRecordCount(), before, r.Refused())
			}
			return
		}
		if got := ld.LogRecordCount(); got != keep {
			t.Fatalf("%d records kept, the reference keeps %d", got, keep)
		}
		if r.Refused() < before-keep {
			t.Fatalf("%d records removed, %d counted", before-keep, r.Refused())
		}
		if again := FilterLogs(ld); again.Refused() != 0 {
			t.Fatalf("what was kept is not canonical: %v", again.First)
		}
	})
}
