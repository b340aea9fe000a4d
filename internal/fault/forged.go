package fault

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// ForgedPrefix is put in front of every fault.* attribute (and the gpu.fault
// event name) that arrives from outside the correlator. Renaming rather than
// dropping keeps what a pod sent visible for an audit while making sure no
// consumer of fault records mistakes it for one.
const ForgedPrefix = "forged."

// StripForged renames every fault.* attribute (resource, scope and record
// attributes) and the gpu.fault event name in logs that arrived over OTLP,
// and returns how many it renamed. Receivers' pipelines call it at the edge;
// the correlator's own output never passes through it.
func StripForged(ld plog.Logs) int { return walkLogs(ld, renameForged, true) }

// StripForgedTraces renames fault.* attributes on resources, scopes, spans,
// span events and span links, and returns how many it renamed.
func StripForgedTraces(td ptrace.Traces) int { return walkTraces(td, renameForged) }

// StripForgedMetrics renames fault.* attributes on resources, scopes, data
// points and exemplars of every metric type, and returns how many it renamed.
func StripForgedMetrics(md pmetric.Metrics) int { return walkMetrics(md, renameForged) }

// HasForged, HasForgedTraces and HasForgedMetrics tell, without changing
// anything, whether the Strip function would rename something. Consumers
// that must not mutate shared data (the correlator reads the same batch as
// the backends' pipelines) strip a copy only when this says so: forged
// attributes are rare, copying every batch is not cheap.
func HasForged(ld plog.Logs) bool { return walkLogs(ld, countForged, false) > 0 }

// HasForgedTraces: see HasForged.
func HasForgedTraces(td ptrace.Traces) bool { return walkTraces(td, countForged) > 0 }

// HasForgedMetrics: see HasForged.
func HasForgedMetrics(md pmetric.Metrics) bool { return walkMetrics(md, countForged) > 0 }

// A mapVisitor looks at (and may change) one attribute map and returns how
// many forged keys it found.
type mapVisitor func(pcommon.Map) int

func walkLogs(ld plog.Logs, visit mapVisitor, renameEvent bool) int {
	n := 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		n += visit(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			n += visit(sl.Scope().Attributes())
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				n += visit(lr.Attributes())
				if lr.EventName() == EventName {
					if renameEvent {
						lr.SetEventName(ForgedPrefix + EventName)
					}
					n++
				}
			}
		}
	}
	return n
}

func walkTraces(td ptrace.Traces, visit mapVisitor) int {
	n := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		n += visit(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			n += visit(ss.Scope().Attributes())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				n += visit(sp.Attributes())
				for e := 0; e < sp.Events().Len(); e++ {
					n += visit(sp.Events().At(e).Attributes())
				}
				for l := 0; l < sp.Links().Len(); l++ {
					n += visit(sp.Links().At(l).Attributes())
				}
			}
		}
	}
	return n
}

func walkMetrics(md pmetric.Metrics, visit mapVisitor) int {
	n := 0
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		n += visit(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			n += visit(sm.Scope().Attributes())
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				n += walkMetric(ms.At(k), visit)
			}
		}
	}
	return n
}

func walkMetric(m pmetric.Metric, visit mapVisitor) int {
	n := 0
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		n += walkNumberPoints(m.Gauge().DataPoints(), visit)
	case pmetric.MetricTypeSum:
		n += walkNumberPoints(m.Sum().DataPoints(), visit)
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			n += visit(dps.At(i).Attributes()) + walkExemplars(dps.At(i).Exemplars(), visit)
		}
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			n += visit(dps.At(i).Attributes()) + walkExemplars(dps.At(i).Exemplars(), visit)
		}
	case pmetric.MetricTypeSummary:
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			n += visit(dps.At(i).Attributes())
		}
	}
	return n
}

func walkNumberPoints(dps pmetric.NumberDataPointSlice, visit mapVisitor) int {
	n := 0
	for i := 0; i < dps.Len(); i++ {
		n += visit(dps.At(i).Attributes()) + walkExemplars(dps.At(i).Exemplars(), visit)
	}
	return n
}

func walkExemplars(es pmetric.ExemplarSlice, visit mapVisitor) int {
	n := 0
	for i := 0; i < es.Len(); i++ {
		n += visit(es.At(i).FilteredAttributes())
	}
	return n
}

// countForged counts the fault.* keys of m.
func countForged(m pcommon.Map) int {
	n := 0
	for k := range m.All() {
		if strings.HasPrefix(k, FaultAttrPrefix) {
			n++
		}
	}
	return n
}

// renameForged moves every fault.* key of m to forged.fault.*. The value is
// copied out before the map changes because pcommon.Value points into the
// map's storage, which Remove and PutEmpty rearrange.
func renameForged(m pcommon.Map) int {
	var keys []string
	for k := range m.All() {
		if strings.HasPrefix(k, FaultAttrPrefix) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		v, _ := m.Get(k)
		held := pcommon.NewValueEmpty()
		v.CopyTo(held)
		m.Remove(k)
		held.CopyTo(m.PutEmpty(ForgedPrefix + k))
	}
	return len(keys)
}
