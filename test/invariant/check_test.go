package invariant

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// The canonical form, checked the obvious way (a set per map), apart from
// internal/otlpmap: what the agent must refuse.

func canonicalValue(v pcommon.Value, depth int) bool {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		return canonicalMap(v.Map(), depth+1)
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		if s.Len() > 0 && depth+1 > otlpmap.MaxDepth {
			return false
		}
		for i := 0; i < s.Len(); i++ {
			if !canonicalValue(s.At(i), depth+1) {
				return false
			}
		}
	}
	return true
}

func canonicalMap(m pcommon.Map, depth int) bool {
	if m.Len() > 0 && depth > otlpmap.MaxDepth {
		return false
	}
	seen := map[string]bool{}
	for k, v := range m.All() {
		if seen[k] || !canonicalValue(v, depth) {
			return false
		}
		seen[k] = true
	}
	return true
}

// expectation is what the agent must do with one request: refuse it, or
// pass on kept records and count refused ones.
type expectation struct {
	refuse        bool
	refused, kept int
}

func (e *expectation) scope(ok bool, records []bool) {
	if !ok {
		e.refused += max(len(records), 1)
		return
	}
	for _, r := range records {
		if r {
			e.kept++
		} else {
			e.refused++
		}
	}
}

func (e *expectation) refuseAll(records int) expectation {
	return expectation{refuse: true, refused: max(records, 1)}
}

func expectLogs(ld plog.Logs) expectation {
	var e expectation
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		if !canonicalMap(rls.At(i).Resource().Attributes(), 1) {
			return e.refuseAll(ld.LogRecordCount())
		}
	}
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			var records []bool
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				ok := canonicalMap(lr.Attributes(), 1) && canonicalValue(lr.Body(), 0)
				if v, has := lr.Attributes().Get("event.name"); ok && has && lr.EventName() != "" {
					ok = v.Type() == pcommon.ValueTypeStr && v.Str() == lr.EventName()
				}
				records = append(records, ok)
			}
			e.scope(canonicalMap(sls.At(j).Scope().Attributes(), 1), records)
		}
	}
	return e
}

func expectTraces(td ptrace.Traces) expectation {
	var e expectation
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		if !canonicalMap(rss.At(i).Resource().Attributes(), 1) {
			return e.refuseAll(td.SpanCount())
		}
	}
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			var records []bool
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				ok := canonicalMap(sp.Attributes(), 1)
				for l := 0; l < sp.Events().Len(); l++ {
					ok = ok && canonicalMap(sp.Events().At(l).Attributes(), 1)
				}
				for l := 0; l < sp.Links().Len(); l++ {
					ok = ok && canonicalMap(sp.Links().At(l).Attributes(), 1)
				}
				records = append(records, ok)
			}
			e.scope(canonicalMap(sss.At(j).Scope().Attributes(), 1), records)
		}
	}
	return e
}

func expectMetrics(md pmetric.Metrics) expectation {
	var e expectation
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		if !canonicalMap(rms.At(i).Resource().Attributes(), 1) {
			return e.refuseAll(md.DataPointCount())
		}
	}
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			var records []bool
			eachPoint(sms.At(j).Metrics(), func(attrs pcommon.Map, exemplars []pcommon.Map) {
				ok := canonicalMap(attrs, 1)
				for _, ex := range exemplars {
					ok = ok && canonicalMap(ex, 1)
				}
				records = append(records, ok)
			})
			e.scope(canonicalMap(sms.At(j).Scope().Attributes(), 1), records)
		}
	}
	return e
}

// eachPoint calls f with every data point's attributes and its exemplars'.
func eachPoint(ms pmetric.MetricSlice, f func(attrs pcommon.Map, exemplars []pcommon.Map)) {
	exemplars := func(es pmetric.ExemplarSlice) []pcommon.Map {
		var out []pcommon.Map
		for i := 0; i < es.Len(); i++ {
			out = append(out, es.At(i).FilteredAttributes())
		}
		return out
	}
	for k := 0; k < ms.Len(); k++ {
		m := ms.At(k)
		switch m.Type() {
		case pmetric.MetricTypeGauge, pmetric.MetricTypeSum:
			var dps pmetric.NumberDataPointSlice
			if m.Type() == pmetric.MetricTypeSum {
				dps = m.Sum().DataPoints()
			} else {
				dps = m.Gauge().DataPoints()
			}
			for i := 0; i < dps.Len(); i++ {
				f(dps.At(i).Attributes(), exemplars(dps.At(i).Exemplars()))
			}
		case pmetric.MetricTypeHistogram:
			dps := m.Histogram().DataPoints()
			for i := 0; i < dps.Len(); i++ {
				f(dps.At(i).Attributes(), exemplars(dps.At(i).Exemplars()))
			}
		case pmetric.MetricTypeExponentialHistogram:
			dps := m.ExponentialHistogram().DataPoints()
			for i := 0; i < dps.Len(); i++ {
				f(dps.At(i).Attributes(), exemplars(dps.At(i).Exemplars()))
			}
		case pmetric.MetricTypeSummary:
			dps := m.Summary().DataPoints()
			for i := 0; i < dps.Len(); i++ {
				f(dps.At(i).Attributes(), nil)
			}
		}
	}
}

func (r request) expect() expectation {
	switch {
	case r.logs != nil:
		return expectLogs(*r.logs)
	case r.metrics != nil:
		return expectMetrics(*r.metrics)
	}
	return expectTraces(*r.traces)
}

// checkAnswer: a request is refused exactly when it must be, with a
// permanent InvalidArgument (what the OTLP receiver turns into HTTP 400).
func checkAnswer(e expectation, err error) error {
	if e.refuse != (err != nil) {
		return fmt.Errorf("the agent answered %v; a resource's map is not canonical: %v", err, e.refuse)
	}
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !consumererror.IsPermanent(err) || !ok || s.Code() != codes.InvalidArgument {
		return fmt.Errorf("a refused request must be a permanent InvalidArgument: %v", err)
	}
	return nil
}

// checkFaults: no fault record names a node but the agent's own, or a GPU
// outside its inventory.
func checkFaults(records []fault.Record) error {
	var errs []error
	for _, r := range records {
		bad := func(what string, args ...any) {
			errs = append(errs, fmt.Errorf("fault %s (%s, rule %s, entity %s:%s) %s", r.ID, r.Type, r.Rule, r.Entity.Kind, r.Entity.Key,
				fmt.Sprintf(what, args...)))
		}
		if r.HostName != "" && r.HostName != ownHost {
			bad("names host %q", r.HostName)
		}
		if r.GPUUUID != "" && !slices.Contains(ownGPUs, r.GPUUUID) {
			bad("names GPU %q, not one of the node's", r.GPUUUID)
		}
		switch r.Entity.Kind {
		case fault.EntityNode:
			if r.Entity.Key != ownHost {
				bad("is about node %q", r.Entity.Key)
			}
		case fault.EntityGPU:
			if !slices.Contains(ownGPUs, r.Entity.Key) {
				bad("is about GPU %q", r.Entity.Key)
			}
		case fault.EntityIBPort:
			if !strings.HasPrefix(r.Entity.Key, ownHost+"/") {
				bad("is about port %q", r.Entity.Key)
			}
		}
	}
	return errors.Join(errs...)
}

// checkNoHardwareNames: nothing that left the provenance processor carries
// a hardware signal's name outside forged.: no metric name, no attribute
// key of any map a reader reads (nor a name Prometheus would store as a
// hardware signal's, host.name's or gpu.uuid's), no log event name or
// event.name value; no
// fault.* attribute nor gpu.fault event name either. (Span names, keys
// nested inside values and an event.name attribute of gpu.fault are read by
// no reader: a fault record is told by its fault.* attributes.)
func checkNoHardwareNames(t *tap) error {
	var errs []error
	keys := func(where string, m pcommon.Map) {
		for k, v := range m.All() {
			if semconv.HardwareSignal(k) || semconv.PrometheusAlias(k) || strings.HasPrefix(k, fault.FaultAttrPrefix) {
				errs = append(errs, fmt.Errorf("%s key %q passed provenance", where, k))
			}
			if k == semconv.AttrEventName && v.Type() == pcommon.ValueTypeStr && semconv.HardwareSignal(v.Str()) {
				errs = append(errs, fmt.Errorf("%s event.name %q passed provenance", where, v.Str()))
			}
		}
	}
	for _, ld := range t.logs {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			keys("resource", rl.Resource().Attributes())
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				sl := rl.ScopeLogs().At(j)
				keys("scope", sl.Scope().Attributes())
				for k := 0; k < sl.LogRecords().Len(); k++ {
					lr := sl.LogRecords().At(k)
					keys("log record", lr.Attributes())
					if eventForbidden(lr.EventName()) {
						errs = append(errs, fmt.Errorf("event name %q passed provenance", lr.EventName()))
					}
				}
			}
		}
	}
	for _, md := range t.metrics {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			keys("resource", rm.Resource().Attributes())
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				sm := rm.ScopeMetrics().At(j)
				keys("scope", sm.Scope().Attributes())
				for k := 0; k < sm.Metrics().Len(); k++ {
					if n := sm.Metrics().At(k).Name(); semconv.HardwareSignal(n) || semconv.PrometheusAlias(n) {
						errs = append(errs, fmt.Errorf("metric %q passed provenance", n))
					}
				}
				eachPoint(sm.Metrics(), func(attrs pcommon.Map, exemplars []pcommon.Map) {
					keys("data point", attrs)
					for _, ex := range exemplars {
						keys("exemplar", ex)
					}
				})
			}
		}
	}
	for _, td := range t.traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			keys("resource", rs.Resource().Attributes())
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				keys("scope", ss.Scope().Attributes())
				for k := 0; k < ss.Spans().Len(); k++ {
					sp := ss.Spans().At(k)
					keys("span", sp.Attributes())
					for e := 0; e < sp.Events().Len(); e++ {
						keys("span event", sp.Events().At(e).Attributes())
					}
					for l := 0; l < sp.Links().Len(); l++ {
						keys("span link", sp.Links().At(l).Attributes())
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

func eventForbidden(name string) bool {
	return semconv.HardwareSignal(name) || name == fault.EventName
}

// tapRecords counts what passed the provenance processor.
func tapRecords(t *tap) int {
	n := 0
	for _, ld := range t.logs {
		n += ld.LogRecordCount()
	}
	for _, md := range t.metrics {
		n += md.DataPointCount()
	}
	for _, td := range t.traces {
		n += td.SpanCount()
	}
	return n
}
