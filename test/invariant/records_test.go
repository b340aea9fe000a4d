package invariant

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

// The grammar's records: log records, metrics of every kind, spans, and
// fake jobs; and a case made of them (attack).

func (g *gen) logs() plog.Logs {
	ld := plog.NewLogs()
	g.resources(1+g.n(3), func() pcommon.Map {
		return ld.ResourceLogs().AppendEmpty().Resource().Attributes()
	}, func(i int) {
		sl := ld.ResourceLogs().At(i).ScopeLogs().AppendEmpty()
		g.scope(sl.Scope())
		for range 1 + g.n(3) {
			g.record(sl.LogRecords().AppendEmpty())
		}
	})
	return otlpmaptest.Logs(ld)
}

// record is one log record shaped like what the readers look for: an XID,
// a hung GPU (event.name said twice, the issue's), a step record, a
// training error, an NCCL finding, or anything.
func (g *gen) record(lr plog.LogRecord) {
	lr.SetTimestamp(g.ts(time.Duration(g.n(10)) * time.Second))
	lr.SetSeverityNumber(plog.SeverityNumber(1 + g.n(24)))
	a := lr.Attributes()
	switch g.n(6) {
	case 0:
		if g.pct(50) {
			lr.SetEventName(pick(g, []string{"gpu.xid", g.lookalike("gpu.xid")}))
		}
		a.PutStr("event.name", "gpu.xid")
		a.PutInt("gpu.xid", int64(pick(g, []int{79, 48, 13})))
		a.PutStr("gpu.xid.source", "kmsg")
	case 1:
		a.PutStr("event.name", "step.note")
		a.PutStr(otlpmaptest.Repeat("event.name"), pick(g, []string{"gpu.unresponsive", g.lookalike("gpu.unresponsive")}))
		if g.pct(50) {
			a.PutBool("gpu.unresponsive", true)
		}
	case 2:
		a.PutInt("iteration.step", int64(g.n(20)))
		a.PutInt("duration_ns", int64(1+g.n(3))*1e9)
		a.PutInt("training.rank", int64(g.n(8)))
		a.PutStr("training.job.id", pick(g, jobClaims))
		a.PutDouble("training.loss", pick(g, []float64{2.5, math.NaN()}))
	case 3:
		a.PutStr("training.error", pick(g, []string{"oom", "timeout"}))
	case 4:
		a.PutStr("event.name", "nccl.finding")
		a.PutStr("nccl.finding", pick(g, []string{"hang", "timeout", "straggler"}))
		a.PutStr("training.job.id", pick(g, jobClaims))
		r := a.PutEmptySlice("nccl.ranks")
		r.AppendEmpty().SetInt(int64(g.n(8)))
	}
	g.attrs(a, 1)
	if g.pct(15) {
		lr.SetEventName(pick(g, eventClaims))
	}
	switch g.n(4) {
	case 0:
		g.attrs(lr.Body().SetEmptyMap(), 1)
	case 1:
		g.value(lr.Body(), 0)
	default:
		lr.Body().SetStr("XID 79: GPU has fallen off the bus")
	}
}

func (g *gen) metrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	g.resources(1+g.n(3), func() pcommon.Map {
		return md.ResourceMetrics().AppendEmpty().Resource().Attributes()
	}, func(i int) {
		sm := md.ResourceMetrics().At(i).ScopeMetrics().AppendEmpty()
		g.scope(sm.Scope())
		for range 1 + g.n(3) {
			g.metric(sm.Metrics().AppendEmpty())
		}
	})
	return otlpmaptest.Metrics(md)
}

// metric is one metric of any kind; a counter grows from 0 to 3 (a DBE,
// if it were believed).
func (g *gen) metric(m pmetric.Metric) {
	name := pick(g, metricNames)
	if g.pct(25) {
		name = g.lookalike(name)
	}
	m.SetName(name)
	points := 1 + g.n(2)
	point := func(attrs pcommon.Map, exemplars pmetric.ExemplarSlice) {
		attrs.PutStr(pick(g, []string{"gpu.ecc.type", "error.type", "hw.sensor_location", "gpu.uuid"}),
			pick(g, []string{"dbe_volatile", "crc_flit", "gpu", victimGPU}))
		g.attrs(attrs, 1)
		if g.pct(30) {
			g.attrs(exemplars.AppendEmpty().FilteredAttributes(), 1)
		}
	}
	switch g.n(5) {
	case 0:
		gauge := m.SetEmptyGauge()
		for i := range points {
			dp := gauge.DataPoints().AppendEmpty()
			dp.SetTimestamp(g.ts(time.Duration(i) * 10 * time.Second))
			dp.SetDoubleValue(float64(g.n(100)))
			point(dp.Attributes(), dp.Exemplars())
		}
	case 1:
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for i := range points {
			dp := s.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(g.ts(-time.Minute))
			dp.SetTimestamp(g.ts(time.Duration(i) * 10 * time.Second))
			dp.SetIntValue(int64(3 * i))
			point(dp.Attributes(), dp.Exemplars())
		}
	case 2:
		h := m.SetEmptyHistogram()
		for i := range points {
			dp := h.DataPoints().AppendEmpty()
			dp.SetTimestamp(g.ts(time.Duration(i) * 10 * time.Second))
			dp.SetCount(uint64(1 + i))
			dp.SetSum(float64(10 * (1 + i)))
			point(dp.Attributes(), dp.Exemplars())
		}
	case 3:
		h := m.SetEmptyExponentialHistogram()
		for i := range points {
			dp := h.DataPoints().AppendEmpty()
			dp.SetTimestamp(g.ts(time.Duration(i) * 10 * time.Second))
			dp.SetCount(uint64(1 + i))
			point(dp.Attributes(), dp.Exemplars())
		}
	default:
		s := m.SetEmptySummary()
		for i := range points {
			dp := s.DataPoints().AppendEmpty()
			dp.SetTimestamp(g.ts(time.Duration(i) * 10 * time.Second))
			dp.SetCount(1)
			point(dp.Attributes(), pmetric.NewExemplarSlice())
		}
	}
}

func (g *gen) traces() ptrace.Traces {
	td := ptrace.NewTraces()
	g.resources(1+g.n(3), func() pcommon.Map {
		return td.ResourceSpans().AppendEmpty().Resource().Attributes()
	}, func(i int) {
		ss := td.ResourceSpans().At(i).ScopeSpans().AppendEmpty()
		g.scope(ss.Scope())
		for range 1 + g.n(2) {
			g.span(ss.Spans().AppendEmpty())
		}
	})
	return otlpmaptest.Traces(td)
}

// span is a rank's step span, a forged verdict or root span, a timed out
// collective, or anything; with events and links.
func (g *gen) span(sp ptrace.Span) {
	sp.SetTraceID(pcommon.TraceID{byte(g.n(256)), 1})
	sp.SetSpanID(pcommon.SpanID{byte(g.n(256)), 2})
	sp.SetStartTimestamp(g.ts(0))
	sp.SetEndTimestamp(g.ts(time.Duration(1+g.n(3)) * time.Second))
	a := sp.Attributes()
	switch g.n(5) {
	case 0:
		sp.SetName("train.step")
		a.PutStr("training.job.id", pick(g, jobClaims))
		a.PutInt("training.rank", int64(g.n(8)))
		a.PutInt("iteration.step", int64(g.n(20)))
	case 1:
		sp.SetName("train.step.verdict")
		a.PutStr("training.job.id", pick(g, jobClaims))
		a.PutInt("training.rank", int64(g.n(8)))
		a.PutStr("straggler.verdict", "straggler.compute")
		g.claim(a, 0)
	case 2:
		sp.SetName("train.step.root")
		a.PutStr("training.job.id", pick(g, jobClaims))
		a.PutStr("straggler.job_verdict", "job.slowdown")
	case 3:
		sp.SetName("all_reduce")
		a.PutStr("nccl.collective", "all_reduce")
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage("timed out after 600000 ms")
	default:
		sp.SetName(pick(g, []string{"forward", "gpu.xid", "train.step"}))
	}
	g.attrs(a, 1)
	for range g.n(3) {
		ev := sp.Events().AppendEmpty()
		ev.SetName(pick(g, eventClaims))
		g.attrs(ev.Attributes(), 1)
	}
	for range g.n(3) {
		g.attrs(sp.Links().AppendEmpty().Attributes(), 1)
	}
}

// job is a fake job's steps: every rank's step span (or step record, the
// steplogs path), one request per step, one rank 2.5x slower; each rank's
// resource claims a node and GPU (claim), and a rank may name another
// host on its span too.
func (g *gen) job() []request {
	ranks, steps := 4+g.n(5), 8+g.n(3)
	slow := g.n(ranks)
	job := pick(g, []string{"job-a", "job-b"})
	asLogs := g.pct(30)
	claims := make([]pcommon.Map, ranks)
	honest := g.repeat
	for r := range claims {
		claims[r] = pcommon.NewMap()
		if g.repeat = 0; r == slow {
			g.repeat = 100 * honest / 40 // the slow rank is the liar, more often than not
		}
		g.claim(claims[r], r)
	}
	g.repeat = honest
	spanHost := -1
	if g.pct(30) {
		spanHost = g.n(ranks)
	}
	var out []request
	for step := range steps {
		start := time.Duration(step) * 3 * time.Second
		resource := func(res pcommon.Map, rank int) {
			res.PutStr("service.name", "train.py")
			res.PutStr("training.job.id", job)
			res.PutInt("training.attempt", 0)
			res.PutInt("training.rank", int64(rank))
			res.PutInt("training.world_size", int64(ranks))
			res.PutInt("training.pp_stage", 0)
			for k, v := range claims[rank].All() {
				v.CopyTo(res.PutEmpty(k))
			}
		}
		measures := func(a pcommon.Map, rank int) time.Duration {
			d := time.Second + time.Duration(rank*7+step*3)*time.Millisecond
			if rank == slow {
				d = 2500 * time.Millisecond
			}
			a.PutInt("iteration.step", int64(step))
			a.PutInt("training.phase.forward_ns", int64(d*3/10))
			a.PutInt("training.phase.backward_ns", int64(d*6/10))
			a.PutInt("training.phase.optimizer_ns", int64(d/10))
			a.PutDouble("training.loss", 2.0)
			if rank == spanHost {
				a.PutStr("host.name", ownHost)
				a.PutStr(otlpmaptest.Repeat("host.name"), victimHost)
			}
			return d
		}
		if asLogs {
			ld := plog.NewLogs()
			for rank := range ranks {
				rl := ld.ResourceLogs().AppendEmpty()
				resource(rl.Resource().Attributes(), rank)
				lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
				lr.SetTimestamp(g.ts(start))
				lr.Attributes().PutStr("event.name", "train.step")
				d := measures(lr.Attributes(), rank)
				lr.Attributes().PutInt("duration_ns", int64(d))
			}
			ld = otlpmaptest.Logs(ld)
			out = append(out, request{logs: &ld})
			continue
		}
		td := ptrace.NewTraces()
		for rank := range ranks {
			rs := td.ResourceSpans().AppendEmpty()
			resource(rs.Resource().Attributes(), rank)
			sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
			sp.SetName("train.step")
			d := measures(sp.Attributes(), rank)
			sp.SetStartTimestamp(g.ts(start))
			sp.SetEndTimestamp(g.ts(start + d))
		}
		td = otlpmaptest.Traces(td)
		out = append(out, request{traces: &td})
	}
	return out
}

// attack is one case: a few requests of any signal and, often, a fake job.
func (g *gen) attack() []request {
	g.repeat = pick(g, []int{5, 15, 40})
	var out []request
	for range 1 + g.n(4) {
		switch g.n(3) {
		case 0:
			ld := g.logs()
			out = append(out, request{logs: &ld})
		case 1:
			md := g.metrics()
			out = append(out, request{metrics: &md})
		default:
			td := g.traces()
			out = append(out, request{traces: &td})
		}
	}
	if g.pct(40) {
		out = append(out, g.job()...)
	}
	return out
}
