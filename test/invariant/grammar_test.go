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
