package faultcorrelator // import "github.com/otelcol-gpu/otelcol-gpu/processor/faultcorrelator"

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// Signal and attribute names the correlator reads besides metric names
// (docs/fault-record.md, "Signals the rules read").
const (
	signalHeartbeat      = "node.heartbeat"
	signalStepDuration   = "training.step.duration"
	attrStragglerVerdict = "straggler.verdict"
	attrTrainingError    = "training.error"
	attrTrainingLoss     = "training.loss"
	attrGPUUnresponsive  = "gpu.unresponsive"
	attrIBDevice         = "ib.device"
	attrIBPort           = "ib.port"
)

// where is what one input says about the entities it belongs to.
type where struct {
	host, gpu, job, ibDevice, ibPort string
	rank                             int64
	rankKnown                        bool
}

// read fills w from attrs; later maps (a record's own attributes) override
// earlier ones (its resource's).
func (w *where) read(attrs pcommon.Map) {
	str := func(k string, dst *string) {
		if v, ok := attrs.Get(k); ok && v.AsString() != "" {
			*dst = v.AsString()
		}
	}
	str(semconv.AttrHostName, &w.host)
	str(semconv.AttrGPUUUID, &w.gpu)
	str(semconv.AttrTrainingJobID, &w.job)
	str(attrIBDevice, &w.ibDevice)
	str(attrIBPort, &w.ibPort)
	if v, ok := attrs.Get(semconv.AttrTrainingRank); ok {
		switch v.Type() {
		case pcommon.ValueTypeInt:
			w.rank, w.rankKnown = v.Int(), true
		case pcommon.ValueTypeStr:
			if n, err := strconv.ParseInt(v.Str(), 10, 64); err == nil {
				w.rank, w.rankKnown = n, true
			}
		}
	}
}

// entities lists every entity the input belongs to, finest first: a signal
// is observed under each, so rules on any kind see it.
func (w where) entities() []fault.Entity {
	var out []fault.Entity
	if w.gpu != "" {
		out = append(out, fault.Entity{Kind: fault.EntityGPU, Key: w.gpu})
	}
	if w.host != "" && w.ibDevice != "" && w.ibPort != "" {
		out = append(out, fault.Entity{Kind: fault.EntityIBPort, Key: w.host + "/" + w.ibDevice + "/" + w.ibPort})
	}
	if w.job != "" && w.rankKnown {
		out = append(out, fault.Entity{Kind: fault.EntityRank, Key: w.job + "/" + strconv.FormatInt(w.rank, 10)})
	}
	if w.host != "" {
		out = append(out, fault.Entity{Kind: fault.EntityNode, Key: w.host})
	}
	if w.job != "" {
		out = append(out, fault.Entity{Kind: fault.EntityJob, Key: w.job})
	}
	return out
}

func timeOr(ts pcommon.Timestamp, fallback time.Time) time.Time {
	if ts == 0 {
		return fallback
	}
	return ts.AsTime()
}

// observe records s under every entity of w and remembers what each entity
// is (host, GPU, job, rank) for the fault records. Callers hold c.mu.
func (c *correlator) observe(w where, s rules.Sample) {
	for _, e := range w.entities() {
		if c.eval.ObserveSample(e, s) {
			c.remember(e, w)
		}
	}
}

// remember keeps the identity of e; bounded like the evaluator's entities.
func (c *correlator) remember(e fault.Entity, w where) {
	old, known := c.info[e]
	if !known && len(c.info) >= c.cfg.MaxEntities {
		return
	}
	// Coarse entities (node, job) must not carry one GPU's or rank's identity.
	switch e.Kind {
	case fault.EntityNode, fault.EntityIBPort:
		w.gpu, w.job, w.rankKnown = "", "", false
	case fault.EntityJob:
		w.gpu, w.host, w.rankKnown = "", "", false
	}
	if w.host == "" {
		w.host = old.host
	}
	c.info[e] = w
}

// heartbeat marks each host seen in a batch once (gateway: node.silent).
func (c *correlator) heartbeat(hosts map[string]time.Time) {
	if c.cfg.Mode != ModeGateway {
		return
	}
	for h, at := range hosts {
		c.observe(where{host: h}, rules.Sample{Signal: signalHeartbeat, Value: 1, At: at})
	}
}

// observeMetrics maps data points onto signals: "name" and "name{k=v}" for
// each point attribute. Cumulative sums are turned into one counter per
// entity (the sum of every source's growth), so that a node's series does
// not interleave its eight GPUs' counters; a histogram contributes its mean
// over the interval.
func (c *correlator) observeMetrics(md pmetric.Metrics, now time.Time) {
	hosts := map[string]time.Time{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		var res where
		res.read(rm.Resource().Attributes())
		resKey := mapKey(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					c.numberPoints(m.Name(), m.Gauge().DataPoints(), res, resKey, false, now, hosts)
				case pmetric.MetricTypeSum:
					cumulative := m.Sum().IsMonotonic() && m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityCumulative
					c.numberPoints(m.Name(), m.Sum().DataPoints(), res, resKey, cumulative, now, hosts)
				case pmetric.MetricTypeHistogram:
					c.histogramPoints(m.Name(), m.Histogram(), res, resKey, now, hosts)
				}
			}
		}
	}
	c.heartbeat(hosts)
}

func (c *correlator) numberPoints(name string, dps pmetric.NumberDataPointSlice, res where, resKey string, cumulative bool, now time.Time, hosts map[string]time.Time) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		w := res
		w.read(dp.Attributes())
		at := timeOr(dp.Timestamp(), now)
		if w.host != "" {
			hosts[w.host] = at
		}
		v := dp.DoubleValue()
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			v = float64(dp.IntValue())
		}
		for _, sig := range signalNames(name, dp.Attributes()) {
			if !cumulative {
				c.observe(w, rules.Sample{Signal: sig, Value: v, At: at})
				continue
			}
			growth := c.counterGrowth(resKey+"\x00"+sig+"\x00"+mapKey(dp.Attributes()), v)
			for _, e := range w.entities() {
				total := c.counters[counterKey{e, sig}] + growth
				if c.eval.ObserveSample(e, rules.Sample{Signal: sig, Value: total, At: at}) {
					c.counters[counterKey{e, sig}] = total
					c.remember(e, w)
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

func (c *correlator) histogramPoints(name string, h pmetric.Histogram, res where, resKey string, now time.Time, hosts map[string]time.Time) {
	dps := h.DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		w := res
		w.read(dp.Attributes())
		at := timeOr(dp.Timestamp(), now)
		if w.host != "" {
			hosts[w.host] = at
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
		for _, sig := range signalNames(name, dp.Attributes()) {
			c.observe(w, rules.Sample{Signal: sig, Value: sum / count, At: at})
		}
	}
}

// signalNames returns name and name{k=v} for each attribute.
func signalNames(name string, attrs pcommon.Map) []string {
	out := []string{name}
	attrs.Range(func(k string, v pcommon.Value) bool {
		out = append(out, name+"{"+k+"="+v.AsString()+"}")
		return true
	})
	return out
}

// mapKey is a stable text form of attrs, to tell sources apart.
func mapKey(attrs pcommon.Map) string {
	parts := make([]string, 0, attrs.Len())
	attrs.Range(func(k string, v pcommon.Value) bool {
		parts = append(parts, k+"="+v.AsString())
		return true
	})
	sort.Strings(parts)
	return strings.Join(parts, "\x01")
}

// observeLogs maps XID records, NCCL findings, GPU hangs, training errors
// and losses onto signals.
func (c *correlator) observeLogs(ld plog.Logs, now time.Time) {
	hosts := map[string]time.Time{}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		var res where
		res.read(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				w := res
				a := lr.Attributes()
				w.read(a)
				at := timeOr(lr.Timestamp(), timeOr(lr.ObservedTimestamp(), now))
				if w.host != "" {
					hosts[w.host] = at
				}
				base := rules.Sample{At: at, TraceID: lr.TraceID(), SpanID: lr.SpanID()}
				num := func(sig string, v float64) {
					s := base
					s.Signal, s.Value = sig, v
					c.observe(w, s)
				}
				text := func(sig, v string) {
					s := base
					s.Signal, s.Text = sig, v
					c.observe(w, s)
				}
				if v, ok := a.Get(semconv.AttrGPUXID); ok && v.Type() == pcommon.ValueTypeInt {
					num(semconv.AttrGPUXID, float64(v.Int()))
				}
				hung := true
				if v, ok := a.Get(attrGPUUnresponsive); ok && v.Type() == pcommon.ValueTypeBool {
					hung = v.Bool()
					num(attrGPUUnresponsive, map[bool]float64{false: 0, true: 1}[hung])
				}
				event := lr.EventName()
				if v, ok := a.Get(semconv.AttrEventName); ok && v.Str() != "" {
					event = v.Str()
				}
				// A "GPU answers again" record must not match the hang rule.
				if event != "" && (event != semconv.EventGPUHang || hung) {
					text(semconv.AttrEventName, event)
				}
				for _, k := range []string{semconv.AttrNCCLFinding, attrTrainingError} {
					if v, ok := a.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
						text(k, v.Str())
					}
				}
				if v, ok := a.Get(attrTrainingLoss); ok {
					switch v.Type() {
					case pcommon.ValueTypeDouble:
						num(attrTrainingLoss, v.Double())
					case pcommon.ValueTypeInt:
						num(attrTrainingLoss, float64(v.Int()))
					}
				}
			}
		}
	}
	c.heartbeat(hosts)
}

// observeTraces (gateway) maps rank step spans onto straggler verdicts and
// step durations, with the span's ids as evidence.
func (c *correlator) observeTraces(td ptrace.Traces, now time.Time) {
	if c.cfg.Mode != ModeGateway {
		return
	}
	hosts := map[string]time.Time{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var res where
		res.read(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				w := res
				w.read(sp.Attributes())
				if !w.rankKnown {
					continue // only rank spans carry per-rank signals
				}
				at := timeOr(sp.EndTimestamp(), now)
				if w.host != "" {
					hosts[w.host] = at
				}
				base := rules.Sample{At: at, TraceID: sp.TraceID(), SpanID: sp.SpanID()}
				if sp.EndTimestamp() > sp.StartTimestamp() {
					s := base
					s.Signal, s.Value = signalStepDuration, sp.EndTimestamp().AsTime().Sub(sp.StartTimestamp().AsTime()).Seconds()
					c.observe(w, s)
				}
				if v, ok := sp.Attributes().Get(attrStragglerVerdict); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
					s := base
					s.Signal, s.Text = attrStragglerVerdict, v.Str()
					c.observe(w, s)
				}
			}
		}
	}
	c.heartbeat(hosts)
}
