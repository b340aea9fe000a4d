package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"

import (
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"
)

// observeMetrics maps data points onto signals: "name" and "name{k=v}" for
// each point attribute. Cumulative sums are turned into one counter per
// entity (the sum of every source's growth), so that a node's series does
// not interleave its eight GPUs' counters; a histogram contributes its mean
// over the interval.
func (c *correlator) observeMetrics(md pmetric.Metrics, now time.Time) {
	act := c.newActivity()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		var res where
		res.read(rm.Resource().Attributes())
		resKey := mapKey(rm.Resource().Attributes())
		rs := resStart{rm: rm}
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					c.numberPoints(m.Name(), m.Gauge().DataPoints(), res, resKey, false, now, act, &rs)
				case pmetric.MetricTypeSum:
					cumulative := m.Sum().IsMonotonic() && m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityCumulative
					c.numberPoints(m.Name(), m.Sum().DataPoints(), res, resKey, cumulative, now, act, &rs)
				case pmetric.MetricTypeHistogram:
					c.histogramPoints(m.Name(), m.Histogram(), res, resKey, now, act)
				}
			}
		}
	}
	c.noteActivity(act)
}

func (c *correlator) numberPoints(name string, dps pmetric.NumberDataPointSlice, res where, resKey string, cumulative bool, now time.Time, act *activity, rs *resStart) {
	checked := c.starts.metrics[name]
	read := c.metricsRead[name] || checked
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		w := res
		w.read(dp.Attributes())
		at := timeOr(dp.Timestamp(), now)
		act.saw(w, now)
		if !read {
			continue // no rule reads this metric in any form
		}
		v := dp.DoubleValue()
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			v = float64(dp.IntValue())
		}
		ents := w.entities()
		for _, sig := range signalNames(name, dp.Attributes()) {
			var source string
			if checked || cumulative {
				source = resKey + "\x00" + sig + "\x00" + mapKey(dp.Attributes())
			}
			if checked {
				c.checkStart(sig, source, v, at, dp.StartTimestamp(), rs, w)
			}
			if !cumulative {
				c.observeUnder(ents, w, rules.Sample{Signal: sig, Value: v, At: at})
				continue
			}
			growth := c.counterGrowth(source, v)
			for _, e := range ents {
				total := c.counters[counterKey{e, sig}] + growth
				if c.eval.ObserveSample(e, rules.Sample{Signal: sig, Value: total, At: at}) {
					c.counters[counterKey{e, sig}] = total
					c.remember(e, w)
					c.kept++
				}
			}
		}
	}
}

// counterGrowth returns how much one source counter grew since its last
// point (0 the first time; a drop is a reset, counted from zero).
func (c *correlator) counterGrowth(source string, v float64) float64 {
	prev, seen := c.sources[source]
	if !seen && len(c.sources) >= c.cfg.MaxEntities*4 {
		return 0 // bounded: an unknown source beyond the limit adds nothing
	}
	c.sources[source] = v
	switch {
	case !seen:
		return 0
	case v < prev:
		return v
	default:
		return v - prev
	}
}

func (c *correlator) histogramPoints(name string, h pmetric.Histogram, res where, resKey string, now time.Time, act *activity) {
	read := c.metricsRead[name]
	dps := h.DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		w := res
		w.read(dp.Attributes())
		at := timeOr(dp.Timestamp(), now)
		act.saw(w, now)
		if !read {
			continue
		}
		sum, count := dp.Sum(), float64(dp.Count())
		if h.AggregationTemporality() == pmetric.AggregationTemporalityCumulative {
			key := resKey + "\x00" + name + "\x00" + mapKey(dp.Attributes())
			prev, seen := c.histograms[key]
			if seen || len(c.histograms) < c.cfg.MaxEntities*4 {
				c.histograms[key] = histPoint{sum: sum, count: count}
			}
			if seen && count >= prev.count {
				sum, count = sum-prev.sum, count-prev.count
			}
		}
		if count <= 0 {
			continue
		}
		ents := w.entities()
		for _, sig := range signalNames(name, dp.Attributes()) {
			c.observeUnder(ents, w, rules.Sample{Signal: sig, Value: sum / count, At: at})
		}
	}
}

// signalNames returns name and name{k=v} for each attribute (each key's
// first entry, as every reader reads a map: otlpmap.Unique).
func signalNames(name string, attrs pcommon.Map) []string {
	out := []string{name}
	for k, v := range otlpmap.Unique(attrs) {
		out = append(out, name+"{"+k+"="+v.AsString()+"}")
	}
	return out
}

// mapKey is a stable text form of attrs, to tell sources apart.
func mapKey(attrs pcommon.Map) string {
	parts := make([]string, 0, attrs.Len())
	for k, v := range otlpmap.Unique(attrs) {
		parts = append(parts, k+"="+v.AsString())
	}
	sort.Strings(parts)
	return strings.Join(parts, "\x01")
}
