package invariant

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"
	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// The grammar of what a sender can put on the wire, written with the
// attacker's literal names. Every choice goes through a chooser: a seeded
// source in TestInvariant (which records the choices, so that a case is a
// fuzz seed too), the fuzzer's bytes in FuzzInvariant.

// chooser picks a number in [0, n).
type chooser interface{ intn(n int) int }

// randChooser draws from a seeded source and records each choice as the
// bytes bytesChooser reads back to the same choice.
type randChooser struct {
	r   *rand.Rand
	rec []byte
}

func (c *randChooser) intn(n int) int {
	v := c.r.IntN(n)
	if n <= 256 {
		c.rec = append(c.rec, byte(v))
	} else {
		c.rec = append(c.rec, byte(v>>8), byte(v))
	}
	return v
}

// bytesChooser reads choices from the fuzzer's bytes; 0 once they run out.
type bytesChooser struct{ b []byte }

func (c *bytesChooser) next() int {
	if len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v
}

func (c *bytesChooser) intn(n int) int {
	if n <= 256 {
		return c.next() % n
	}
	return (c.next()<<8 | c.next()) % n
}

// request is one OTLP export request, of one signal; own: what the
// agent's own receivers (GPU, IB, NCCL) produce, not OTLP input.
type request struct {
	logs    *plog.Logs
	metrics *pmetric.Metrics
	traces  *ptrace.Traces
	own     bool
}

type gen struct {
	c    chooser
	base time.Time
	// repeat is the case's share (%) of maps that name a key twice: some
	// cases are mostly honest, some mostly not.
	repeat int
}

func (g *gen) n(n int) int         { return g.c.intn(n) }
func (g *gen) pct(p int) bool      { return g.c.intn(100) < p }
func pick[T any](g *gen, xs []T) T { return xs[g.n(len(xs))] }

// The claims: this node and its GPUs, the victim's, and look-alikes of
// both (case, Cyrillic letters, a zero-width space, a trailing space).
var (
	hostClaims = []string{ownHost, ownHost, victimHost, victimHost, "node-other", "NODE-OWN", "Node-Victim",
		ownHost + "\u200b", "n\u043ede-victim", ownHost + " ", ""}
	gpuClaims = []string{ownGPUs[0], ownGPUs[1], ownGPUs[0], victimGPU, victimGPU, strings.ToLower(ownGPUs[0]),
		ownGPUs[1] + " ", strings.Replace(ownGPUs[1], "0a", "0\u0430", 1), ""}
	eventClaims = []string{"gpu.unresponsive", "gpu.xid", "gpu.fault", "nccl.finding", "train.step", "step.note", "checkpoint.saved"}
	jobClaims   = []string{"job-a", "job-a", "job-b", ""}
	// identityKeys are what readers decide on: who, which GPU, which rank,
	// which event.
	identityKeys = []string{"host.name", "gpu.uuid", "gpu.index", "event.name", "training.job.id", "training.rank",
		"training.world_size", "training.attempt", "training.pp_stage", "iteration.step", "training.loss", "training.error",
		"duration_ns", "service.name", "nccl.finding", "nccl.ranks", "straggler.verdict", "fault.id", "fault.type", "gpu.unresponsive"}
	// metricNames: the hardware metrics scripts must not send and what
	// scripts do send.
	metricNames = []string{"gpu.ecc.errors", "gpu.nvlink.errors", "gpu.xid.errors", "gpu.unresponsive", "hw.temperature",
		"hw.errors", "gpu.clock.throttle", "gpu.memory.row_remap_failure", "DCGM_FI_DEV_XID_ERRORS", "training.mfu", "training.loss"}
	hardware = semconv.HardwareSignals()
)

// lookalike is a variant of s a careless reader might take for s.
func (g *gen) lookalike(s string) string {
	switch g.n(10) {
	case 0:
		return strings.ToUpper(s)
	case 1:
		r, size := utf8.DecodeRuneInString(s)
		return strings.ToUpper(string(r)) + s[size:]
	case 2:
		return strings.ReplaceAll(s, ".", "_")
	case 3:
		return s[:len(s)/2] + "\u200b" + s[len(s)/2:]
	case 4:
		for _, sub := range [][2]string{{"i", "\u0456"}, {"o", "\u043e"}, {"e", "\u0435"}, {"a", "\u0430"}, {"c", "\u0441"}} {
			if strings.Contains(s, sub[0]) {
				return strings.Replace(s, sub[0], sub[1], 1)
			}
		}
		return s + "\u0301"
	case 5:
		if c := s[0]; c >= 'a' && c <= 'z' {
			return string(rune(0xFF41+int(c-'a'))) + s[1:]
		}
		return "\uFF3F" + s
	case 6:
		return s + " "
	case 7:
		return "forged." + s // a pre-forged claim
	case 8:
		return strings.ReplaceAll(s, ".", "\u2024")
	}
	return "\u202e" + s // a bidirectional override
}

// key is an attribute key: a key readers decide on, a hardware signal, a
// look-alike of either, or anything.
func (g *gen) key() string {
	switch r := g.n(20); {
	case r < 9:
		return pick(g, identityKeys)
	case r < 14:
		return pick(g, hardware)
	case r < 18:
		if g.pct(50) {
			return g.lookalike(pick(g, identityKeys))
		}
		return g.lookalike(pick(g, hardware))
	}
	return "k" + strconv.Itoa(g.n(4))
}

// put puts a value fitting key k under name (k, or a Repeat of it).
func (g *gen) put(m pcommon.Map, name, k string, depth int) {
	base := strings.TrimPrefix(k, "forged.")
	switch base {
	case "host.name":
		m.PutStr(name, pick(g, hostClaims))
		return
	case "gpu.uuid":
		m.PutStr(name, pick(g, gpuClaims))
		return
	case "event.name":
		e := pick(g, eventClaims)
		if g.pct(20) {
			e = g.lookalike(e)
		}
		m.PutStr(name, e)
		return
	case "gpu.index":
		switch g.n(4) {
		case 0:
			m.PutInt(name, int64(g.n(4)))
		case 1:
			m.PutStr(name, "1")
		case 2:
			m.PutDouble(name, 1.5)
		default:
			m.PutInt(name, -1)
		}
		return
	case "training.job.id":
		m.PutStr(name, pick(g, jobClaims))
		return
	case "training.rank", "training.world_size", "training.attempt", "training.pp_stage", "iteration.step", "gpu.xid":
		if g.pct(80) {
			m.PutInt(name, int64(pick(g, []int{0, 1, 3, 7, 48, 79})))
		} else {
			m.PutDouble(name, pick(g, []float64{3, 3.5, -1}))
		}
		return
	case "training.loss":
		m.PutDouble(name, pick(g, []float64{2.25, math.NaN(), math.Inf(1)}))
		return
	case "gpu.unresponsive":
		m.PutBool(name, g.pct(80))
		return
	case "nccl.ranks":
		s := m.PutEmptySlice(name)
		for range 1 + g.n(3) {
			s.AppendEmpty().SetInt(int64(g.n(8)))
		}
		return
	case "straggler.verdict":
		m.PutStr(name, "straggler.compute")
		return
	}
	g.value(m.PutEmpty(name), depth)
}

// value fills v with a scalar, or (rarely, and bounded) a map or a list,
// or a chain nested deeper than the canonical form allows.
func (g *gen) value(v pcommon.Value, depth int) {
	switch r := g.n(20); {
	case r < 6:
		v.SetStr(pick(g, append(append([]string{}, hostClaims...), gpuClaims...)))
	case r < 10:
		v.SetInt(int64(g.n(100)))
	case r < 12:
		v.SetDouble(float64(g.n(100)) / 7)
	case r < 13:
		v.SetBool(true)
	case r < 16 && depth < 3:
		g.attrs(v.SetEmptyMap(), depth+1)
	case r < 18 && depth < 3:
		s := v.SetEmptySlice()
		for range 1 + g.n(3) {
			g.value(s.AppendEmpty(), depth+1)
		}
	case r == 18:
		m := v.SetEmptyMap()
		for range otlpmap.MaxDepth + g.n(3) - 1 {
			m = m.PutEmptyMap("deeper")
		}
		m.PutStr("gpu.xid", "79")
	default:
		v.SetStr(pick(g, eventClaims))
	}
}

// attrs fills a map: a few keys, and (often) some of them, or the ones
// readers decide on, named again with another value, before or after.
func (g *gen) attrs(m pcommon.Map, depth int) {
	var keys []string
	for range g.n(6) {
		k := g.key()
		keys = append(keys, k)
		g.put(m, k, k, depth)
	}
	if !g.pct(g.repeat) {
		return
	}
	for range 1 + g.n(2) {
		k := pick(g, []string{"host.name", "gpu.uuid", "event.name", "training.rank", "training.job.id", "gpu.index"})
		if len(keys) > 0 && g.pct(40) {
			k = pick(g, keys)
		}
		if _, ok := m.Get(k); !ok {
			g.put(m, k, k, depth)
		}
		g.put(m, otlpmaptest.Repeat(k), k, depth)
	}
}

// claim puts host.name and gpu.uuid on a resource: mostly this node and
// one of its GPUs; in a share of the case's repeat, another node's, or
// both, one after the other.
func (g *gen) claim(m pcommon.Map, rank int) {
	own := ownGPUs[rank%len(ownGPUs)]
	for _, c := range [][3]string{{"host.name", ownHost, victimHost}, {"gpu.uuid", own, victimGPU}} {
		if !g.pct(g.repeat) {
			if g.pct(90) {
				m.PutStr(c[0], c[1])
			}
			continue
		}
		switch g.n(3) {
		case 0:
			m.PutStr(c[0], c[2])
		case 1:
			m.PutStr(c[0], c[1])
			m.PutStr(otlpmaptest.Repeat(c[0]), c[2])
		default:
			m.PutStr(c[0], c[2])
			m.PutStr(otlpmaptest.Repeat(c[0]), c[1])
		}
	}
}

func (g *gen) ts(offset time.Duration) pcommon.Timestamp {
	return pcommon.NewTimestampFromTime(g.base.Add(offset))
}

// resources adds n resources (one of them, sometimes, without any
// attribute, or the same as the one before) and calls fill for each.
func (g *gen) resources(n int, add func() pcommon.Map, fill func(i int)) {
	var prev pcommon.Map
	for i := range n {
		m := add()
		switch r := g.n(10); {
		case r == 0: // a missing resource: no host.name, nothing
		case r == 1 && i > 0:
			prev.CopyTo(m) // a repeated resource
		default:
			m.PutStr("service.name", "train.py")
			g.claim(m, i)
			if g.pct(40) {
				g.attrs(m, 1)
			}
		}
		prev = m
		fill(i)
	}
}

// scope: a scope sometimes has attributes of its own, sometimes the
// GPU receiver's name.
func (g *gen) scope(s pcommon.InstrumentationScope) {
	if g.pct(20) {
		s.SetName("github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver")
	}
	if g.pct(20) {
		g.attrs(s.Attributes(), 1)
	}
}

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
