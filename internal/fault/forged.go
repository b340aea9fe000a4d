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
func StripForged(ld plog.Logs) int {
	n := 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		n += renameForged(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			n += renameForged(sl.Scope().Attributes())
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				n += renameForged(lr.Attributes())
				if lr.EventName() == EventName {
					lr.SetEventName(ForgedPrefix + EventName)
					n++
				}
			}
		}
	}
	return n
}

// StripForgedTraces renames fault.* attributes on resources, scopes, spans,
// span events and span links, and returns how many it renamed.
func StripForgedTraces(td ptrace.Traces) int {
	n := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		n += renameForged(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			n += renameForged(ss.Scope().Attributes())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				n += renameForged(sp.Attributes())
				for e := 0; e < sp.Events().Len(); e++ {
					n += renameForged(sp.Events().At(e).Attributes())
				}
				for l := 0; l < sp.Links().Len(); l++ {
					n += renameForged(sp.Links().At(l).Attributes())
				}
			}
		}
	}
	return n
}

// StripForgedMetrics renames fault.* attributes on resources, scopes, data
// points and exemplars of every metric type, and returns how many it renamed.
func StripForgedMetrics(md pmetric.Metrics) int {
	n := 0
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		n += renameForged(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			n += renameForged(sm.Scope().Attributes())
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				n += stripMetric(ms.At(k))
			}
		}
	}
	return n
}

func stripMetric(m pmetric.Metric) int {
	n := 0
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		n += stripNumberPoints(m.Gauge().DataPoints())
	case pmetric.MetricTypeSum:
		n += stripNumberPoints(m.Sum().DataPoints())
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			n += renameForged(dps.At(i).Attributes()) + stripExemplars(dps.At(i).Exemplars())
		}
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			n += renameForged(dps.At(i).Attributes()) + stripExemplars(dps.At(i).Exemplars())
		}
	case pmetric.MetricTypeSummary:
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			n += renameForged(dps.At(i).Attributes())
		}
	}
	return n
}

func stripNumberPoints(dps pmetric.NumberDataPointSlice) int {
	n := 0
	for i := 0; i < dps.Len(); i++ {
		n += renameForged(dps.At(i).Attributes()) + stripExemplars(dps.At(i).Exemplars())
	}
	return n
}

func stripExemplars(es pmetric.ExemplarSlice) int {
	n := 0
	for i := 0; i < es.Len(); i++ {
		n += renameForged(es.At(i).FilteredAttributes())
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
