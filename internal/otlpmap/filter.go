package otlpmap // import "github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"

import (
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Report is what a Filter call found and removed.
type Report struct {
	// Refuse: a resource's map is not canonical. Nothing was removed, and
	// the caller refuses the whole request: the resource is what every
	// record under it is about, and no record of a request that says two
	// things about who sent it is kept. Records then counts every record
	// of the request under that problem.
	Refuse bool
	// First is the first problem found (the resource's when Refuse).
	First Problem
	// Records counts the records refused (log records, spans, data points;
	// a refused scope or request without records counts one), by the
	// problem that refused them.
	Records [NumKinds]int
}

// Refused is the number of records refused, whatever the problem.
func (r *Report) Refused() int {
	n := 0
	for _, c := range r.Records {
		n += c
	}
	return n
}

func (r *Report) note(p Problem, records int) {
	if r.Refused() == 0 {
		r.First = p
	}
	r.Records[p.Kind] += max(records, 1)
}

func refuse(p Problem, records int) Report {
	r := Report{Refuse: true}
	r.note(p, records)
	return r
}

// FilterLogs removes from ld every log record that is not canonical
// (LogRecord), and every scope whose attributes are not (with its
// records); a resource or scope left empty by a removal goes too. When a
// resource's attributes are not canonical it removes nothing and reports
// Refuse. A canonical request is left as it is, and costs only the checks.
func FilterLogs(ld plog.Logs) Report {
	rls := ld.ResourceLogs()
	clean := true
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		if p := Map(rl.Resource().Attributes()); !p.OK() {
			return refuse(p, ld.LogRecordCount())
		}
		clean = clean && logsClean(rl)
	}
	var r Report
	if clean {
		return r
	}
	rls.RemoveIf(func(rl plog.ResourceLogs) bool {
		before := r.Refused()
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			if p := Map(sl.Scope().Attributes()); !p.OK() {
				r.note(p, sl.LogRecords().Len())
				return true
			}
			n := r.Refused()
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				p := LogRecord(lr)
				if !p.OK() {
					r.note(p, 1)
				}
				return !p.OK()
			})
			return r.Refused() > n && sl.LogRecords().Len() == 0
		})
		return r.Refused() > before && rl.ScopeLogs().Len() == 0
	})
	return r
}

func logsClean(rl plog.ResourceLogs) bool {
	sls := rl.ScopeLogs()
	for j := 0; j < sls.Len(); j++ {
		sl := sls.At(j)
		if !Map(sl.Scope().Attributes()).OK() {
			return false
		}
		lrs := sl.LogRecords()
		for k := 0; k < lrs.Len(); k++ {
			if !LogRecord(lrs.At(k)).OK() {
				return false
			}
		}
	}
	return true
}

// FilterTraces is FilterLogs for spans: a span whose attributes, or an
// event's or link's, are not canonical is removed (Span).
func FilterTraces(td ptrace.Traces) Report {
	rss := td.ResourceSpans()
	clean := true
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		if p := Map(rs.Resource().Attributes()); !p.OK() {
			return refuse(p, td.SpanCount())
		}
		clean = clean && spansClean(rs)
	}
	var r Report
	if clean {
		return r
	}
	rss.RemoveIf(func(rs ptrace.ResourceSpans) bool {
		before := r.Refused()
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			if p := Map(ss.Scope().Attributes()); !p.OK() {
				r.note(p, ss.Spans().Len())
				return true
			}
			n := r.Refused()
			ss.Spans().RemoveIf(func(sp ptrace.Span) bool {
				p := Span(sp)
				if !p.OK() {
					r.note(p, 1)
				}
				return !p.OK()
			})
			return r.Refused() > n && ss.Spans().Len() == 0
		})
		return r.Refused() > before && rs.ScopeSpans().Len() == 0
	})
	return r
}

func spansClean(rs ptrace.ResourceSpans) bool {
	sss := rs.ScopeSpans()
	for j := 0; j < sss.Len(); j++ {
		ss := sss.At(j)
		if !Map(ss.Scope().Attributes()).OK() {
			return false
		}
		spans := ss.Spans()
		for k := 0; k < spans.Len(); k++ {
			if !Span(spans.At(k)).OK() {
				return false
			}
		}
	}
	return true
}

// FilterMetrics is FilterLogs for metrics: a data point of any kind whose
// attributes, or an exemplar's, are not canonical is removed, and a metric
// left without points goes too.
func FilterMetrics(md pmetric.Metrics) Report {
	rms := md.ResourceMetrics()
	clean := true
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		if p := Map(rm.Resource().Attributes()); !p.OK() {
			return refuse(p, md.DataPointCount())
		}
		clean = clean && metricsClean(rm)
	}
	var r Report
	if clean {
		return r
	}
	rms.RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		before := r.Refused()
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			if p := Map(sm.Scope().Attributes()); !p.OK() {
				r.note(p, scopePoints(sm))
				return true
			}
			n := r.Refused()
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				k := r.Refused()
				left := filterPoints(m, &r)
				return r.Refused() > k && left == 0
			})
			return r.Refused() > n && sm.Metrics().Len() == 0
		})
		return r.Refused() > before && rm.ScopeMetrics().Len() == 0
	})
	return r
}

func metricsClean(rm pmetric.ResourceMetrics) bool {
	sms := rm.ScopeMetrics()
	for j := 0; j < sms.Len(); j++ {
		sm := sms.At(j)
		if !Map(sm.Scope().Attributes()).OK() {
			return false
		}
		ms := sm.Metrics()
		for k := 0; k < ms.Len(); k++ {
			if !pointsClean(ms.At(k)) {
				return false
			}
		}
	}
	return true
}

func scopePoints(sm pmetric.ScopeMetrics) int {
	n := 0
	for k := 0; k < sm.Metrics().Len(); k++ {
		n += pointCount(sm.Metrics().At(k))
	}
	return n
}

func pointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

func pointsClean(m pmetric.Metric) bool {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return numbersClean(m.Gauge().DataPoints())
	case pmetric.MetricTypeSum:
		return numbersClean(m.Sum().DataPoints())
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			if !HistogramDataPoint(dps.At(i)).OK() {
				return false
			}
		}
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			if !ExponentialHistogramDataPoint(dps.At(i)).OK() {
				return false
			}
		}
	case pmetric.MetricTypeSummary:
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			if !SummaryDataPoint(dps.At(i)).OK() {
				return false
			}
		}
	}
	return true
}

func numbersClean(dps pmetric.NumberDataPointSlice) bool {
	for i := 0; i < dps.Len(); i++ {
		if !NumberDataPoint(dps.At(i)).OK() {
			return false
		}
	}
	return true
}

// filterPoints removes m's points that are not canonical, noting each in
// r, and returns how many are left.
func filterPoints(m pmetric.Metric, r *Report) int {
	drop := func(p Problem) bool {
		if !p.OK() {
			r.note(p, 1)
		}
		return !p.OK()
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps := m.Gauge().DataPoints()
		dps.RemoveIf(func(dp pmetric.NumberDataPoint) bool { return drop(NumberDataPoint(dp)) })
	case pmetric.MetricTypeSum:
		dps := m.Sum().DataPoints()
		dps.RemoveIf(func(dp pmetric.NumberDataPoint) bool { return drop(NumberDataPoint(dp)) })
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		dps.RemoveIf(func(dp pmetric.HistogramDataPoint) bool { return drop(HistogramDataPoint(dp)) })
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		dps.RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
			return drop(ExponentialHistogramDataPoint(dp))
		})
	case pmetric.MetricTypeSummary:
		dps := m.Summary().DataPoints()
		dps.RemoveIf(func(dp pmetric.SummaryDataPoint) bool { return drop(SummaryDataPoint(dp)) })
	}
	return pointCount(m)
}
