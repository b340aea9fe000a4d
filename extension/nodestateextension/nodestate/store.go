package nodestate // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bounds that protect the store from garbage input; they are far above what
// a real GPU node produces.
const (
	// MaxKeyLen is the longest gpu.uuid, ib.device or ib.port kept; longer
	// keys are dropped.
	MaxKeyLen = 256
	// MaxXIDCodesPerGPU is how many XID codes' gpu.xid.errors series one GPU
	// keeps; further codes are dropped.
	MaxXIDCodesPerGPU = 16
	// MaxThrottleReasons is how many active throttle reasons one reading
	// keeps, MaxThrottleReasonLen the longest reason kept.
	MaxThrottleReasons   = 16
	MaxThrottleReasonLen = 64
	// maxFutureSkew is how far ahead of the wall clock a reading may be: one
	// from far in the future would make every real reading look older than
	// the retention and be trimmed.
	maxFutureSkew = 5 * time.Minute
)

// Limits bound the store's memory.
type Limits struct {
	// Retention is how long readings are kept, measured back from the
	// newest reading of each series. A GPU or port not recorded for
	// Retention (wall clock) is forgotten.
	Retention time.Duration
	// MaxGPUs and MaxIBPorts bound the GPUs and ports held; a new one beyond
	// the bound evicts the least recently recorded.
	MaxGPUs    int
	MaxIBPorts int
	// MaxSamplesPerSeries bounds each gauge and counter series.
	MaxSamplesPerSeries int
	// MaxXIDEventsPerGPU bounds the XID events held per GPU.
	MaxXIDEventsPerGPU int
}

// DefaultLimits are sized for a node of up to 8 GPUs with MIG (64 GPU
// instances) and readings every second for 10 minutes.
func DefaultLimits() Limits {
	return Limits{
		Retention:           10 * time.Minute,
		MaxGPUs:             64,
		MaxIBPorts:          64,
		MaxSamplesPerSeries: 600,
		MaxXIDEventsPerGPU:  256,
	}
}

// EvictionReason says why a GPU or port was forgotten.
type EvictionReason string

// Eviction reasons.
const (
	EvictedCapacity EvictionReason = "capacity" // a new one arrived at MaxGPUs / MaxIBPorts
	EvictedIdle     EvictionReason = "idle"     // not recorded for Retention
)

// Kinds of what the store holds, as passed to the eviction hook.
const (
	KindGPU    = "gpu"
	KindIBPort = "ib_port"
)

// Option configures a MemoryStore.
type Option func(*MemoryStore)

// WithEvictionHook calls hook (under the store's lock: keep it short) each
// time a GPU (kind KindGPU) or port (KindIBPort) is forgotten.
func WithEvictionHook(hook func(kind string, reason EvictionReason)) Option {
	return func(s *MemoryStore) { s.onEvict = hook }
}

// Stats describe what a MemoryStore holds and has dropped.
type Stats struct {
	GPUs, IBPorts               int
	EvictedGPUs, EvictedIBPorts uint64
	// Dropped counts readings refused: a key too long, a time that is zero
	// or too far in the future, an XID code beyond MaxXIDCodesPerGPU.
	Dropped uint64
}

// MemoryStore is the in-memory Store of the nodestate extension.
type MemoryStore struct {
	limits    Limits
	retention int64 // Limits.Retention in nanoseconds
	now       func() time.Time
	onEvict   func(kind string, reason EvictionReason)

	mu    sync.RWMutex
	gpus  *lru[*gpuState]
	ports *lru[*portState]
	stats Stats
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store. Limits below 1 (2 for samples per
// series: a delta needs two readings) are raised to it.
func NewMemoryStore(limits Limits, opts ...Option) *MemoryStore {
	limits.Retention = max(limits.Retention, time.Nanosecond)
	limits.MaxGPUs = max(limits.MaxGPUs, 1)
	limits.MaxIBPorts = max(limits.MaxIBPorts, 1)
	limits.MaxSamplesPerSeries = max(limits.MaxSamplesPerSeries, 2)
	limits.MaxXIDEventsPerGPU = max(limits.MaxXIDEventsPerGPU, 1)
	s := &MemoryStore{
		limits:    limits,
		retention: int64(limits.Retention),
		now:       time.Now,
		gpus:      newLRU[*gpuState](),
		ports:     newLRU[*portState](),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

type gpuState struct {
	smActive    series[float64]
	temperature series[float64]
	throttle    series[[]string]
	counters    [NumGPUCounters]series[counterValue]
	xidCounters []xidSeries
	xidComplete series[struct{}] // times of readings with XIDCountersComplete
	xidEvents   series[int]
}

type xidSeries struct {
	code int
	s    series[counterValue]
}

type portState struct {
	device, port string
	counters     [NumIBCounters]series[counterValue]
}

// RecordGPU implements Store.
func (s *MemoryStore) RecordGPU(uuid string, at time.Time, sample GPUSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts, ok := s.acceptable(uuid, at)
	if !ok {
		return
	}
	g := s.gpu(uuid)
	r, n := s.retention, s.limits.MaxSamplesPerSeries
	if v := sample.SMActive; v.Valid && isFinite(v.Value) {
		g.smActive.add(ts, v.Value, r, n)
	}
	if v := sample.TemperatureC; v.Valid && isFinite(v.Value) {
		g.temperature.add(ts, v.Value, r, n)
	}
	if sample.ThrottleValid {
		g.throttle.add(ts, g.throttleReasons(ts, sample.ThrottleReasons), r, n)
	}
	for i, c := range sample.Counters {
		if c.Valid {
			g.counters[i].add(ts, toCounterValue(c), r, n)
		}
	}
	for _, x := range sample.XIDCounters {
		if !x.Count.Valid {
			continue
		}
		xs, created := g.xidSeries(x.Code)
		if xs == nil {
			s.stats.Dropped++
			continue
		}
		cv := toCounterValue(x.Count)
		if created {
			// The code was not listed in the last complete reading: it
			// counted 0 then, if its series had started by then.
			if i := g.xidComplete.firstAtOrAfter(ts) - 1; i >= 0 {
				if prev := g.xidComplete.samples[i].at; cv.start == 0 || cv.start <= prev {
					xs.add(prev, counterValue{start: cv.start}, r, n)
				}
			}
		}
		xs.add(ts, cv, r, n)
	}
	if sample.XIDCountersComplete {
		g.xidComplete.add(ts, struct{}{}, r, n)
	}
}

// RecordXID implements Store.
func (s *MemoryStore) RecordXID(uuid string, at time.Time, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts, ok := s.acceptable(uuid, at)
	if !ok {
		return
	}
	g := s.gpu(uuid)
	g.xidEvents.add(ts, code, s.retention, s.limits.MaxXIDEventsPerGPU)
}

// RecordIB implements Store.
func (s *MemoryStore) RecordIB(device, port string, at time.Time, sample IBSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(port) > MaxKeyLen {
		s.stats.Dropped++
		return
	}
	ts, ok := s.acceptable(device, at)
	if !ok {
		return
	}
	key := device + "\x00" + port
	now := s.now()
	expire(s, s.ports, KindIBPort, now)
	p, ok := s.ports.get(key)
	if !ok {
		if s.ports.len() >= s.limits.MaxIBPorts {
			evictOldest(s, s.ports, KindIBPort, EvictedCapacity)
		}
		p = &portState{device: strings.Clone(device), port: strings.Clone(port)}
	}
	s.ports.touch(key, p, now)
	for i, c := range sample.Counters {
		if c.Valid {
			p.counters[i].add(ts, toCounterValue(c), s.retention, s.limits.MaxSamplesPerSeries)
		}
	}
}

// GPUHealth implements Store.
func (s *MemoryStore) GPUHealth(uuid string, from, to time.Time) (GPUHealth, bool) {
	if from.After(to) {
		return GPUHealth{}, false
	}
	f, t := from.UnixNano(), to.UnixNano()
	s.mu.RLock()
	defer s.mu.RUnlock()
	g, ok := s.gpus.get(uuid)
	if !ok {
		return GPUHealth{}, false
	}
	h := GPUHealth{UUID: uuid}
	known := false
	if r, ok := g.smActive.latest(t); ok {
		h.SMActive, known = GaugeReading{Value: r.v, At: unixTime(r.at), Valid: true}, true
	}
	if r, ok := g.temperature.latest(t); ok {
		h.TemperatureC, known = GaugeReading{Value: r.v, At: unixTime(r.at), Valid: true}, true
	}
	if r, ok := g.throttle.latest(t); ok {
		h.ThrottleReasons, known = ThrottleReading{Reasons: slices.Clone(r.v), At: unixTime(r.at), Valid: true}, true
	}
	for i := range g.counters {
		h.Counters[i] = counterDelta(&g.counters[i], f, t)
		known = known || h.Counters[i].Valid
	}
	xids := map[int]uint64{}
	for i := range g.xidCounters {
		xs := &g.xidCounters[i]
		d := counterDelta(&xs.s, f, t)
		known = known || d.Valid
		if d.Delta > 0 {
			xids[xs.code] = d.Delta
		}
	}
	if g.xidEvents.atOrBefore(t) >= 0 {
		known = true
	}
	events := map[int]uint64{}
	for i := g.xidEvents.firstAtOrAfter(f); i < len(g.xidEvents.samples) && g.xidEvents.samples[i].at <= t; i++ {
		events[g.xidEvents.samples[i].v]++
	}
	for code, n := range events {
		xids[code] = max(xids[code], n)
	}
	for code, n := range xids {
		h.XIDs = append(h.XIDs, XIDCount{Code: code, Count: n})
	}
	slices.SortFunc(h.XIDs, func(a, b XIDCount) int { return cmp.Compare(a.Code, b.Code) })
	return h, known
}

// NodeIBHealth implements Store.
func (s *MemoryStore) NodeIBHealth(from, to time.Time) (IBHealth, bool) {
	if from.After(to) {
		return IBHealth{}, false
	}
	f, t := from.UnixNano(), to.UnixNano()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var h IBHealth
	s.ports.each(func(p *portState) {
		ph := IBPortHealth{Device: p.device, Port: p.port}
		valid := false
		for i := range p.counters {
			ph.Counters[i] = counterDelta(&p.counters[i], f, t)
			valid = valid || ph.Counters[i].Valid
			h.Totals[i] = saturatingAdd(h.Totals[i], ph.Counters[i].Delta)
		}
		if valid {
			h.Ports = append(h.Ports, ph)
		}
	})
	slices.SortFunc(h.Ports, func(a, b IBPortHealth) int {
		return cmp.Or(strings.Compare(a.Device, b.Device), strings.Compare(a.Port, b.Port))
	})
	return h, len(h.Ports) > 0
}

// Stats returns what the store holds and has dropped.
func (s *MemoryStore) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.stats
	st.GPUs, st.IBPorts = s.gpus.len(), s.ports.len()
	return st
}

// Reset forgets everything (the extension's Shutdown).
func (s *MemoryStore) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gpus, s.ports = newLRU[*gpuState](), newLRU[*portState]()
}

// acceptable checks a key and a time; it counts a refusal. Called with the
// lock held.
func (s *MemoryStore) acceptable(key string, at time.Time) (int64, bool) {
	if key == "" || len(key) > MaxKeyLen || at.IsZero() || at.After(s.now().Add(maxFutureSkew)) {
		s.stats.Dropped++
		return 0, false
	}
	return at.UnixNano(), true
}

// gpu returns the state of a GPU, creating it (and evicting to make room)
// when new, and marks it recorded now. Called with the lock held.
func (s *MemoryStore) gpu(uuid string) *gpuState {
	now := s.now()
	expire(s, s.gpus, KindGPU, now)
	g, ok := s.gpus.get(uuid)
	if !ok {
		if s.gpus.len() >= s.limits.MaxGPUs {
			evictOldest(s, s.gpus, KindGPU, EvictedCapacity)
		}
		g = &gpuState{}
		uuid = strings.Clone(uuid) // the key must not pin the request buffer it came from
	}
	s.gpus.touch(uuid, g, now)
	return g
}

// expire forgets what has not been recorded for the retention (wall
// clock). Called with the lock held.
func expire[V any](s *MemoryStore, l *lru[V], kind string, now time.Time) {
	for {
		seen, ok := l.oldest()
		if !ok || now.Sub(seen) <= s.limits.Retention {
			return
		}
		evictOldest(s, l, kind, EvictedIdle)
	}
}

// evictOldest forgets the least recently recorded entry. Called with the
// lock held.
func evictOldest[V any](s *MemoryStore, l *lru[V], kind string, reason EvictionReason) {
	l.removeOldest()
	if kind == KindGPU {
		s.stats.EvictedGPUs++
	} else {
		s.stats.EvictedIBPorts++
	}
	if s.onEvict != nil {
		s.onEvict(kind, reason)
	}
}

// throttleReasons returns the reasons to store: sorted, bounded, and the
// previous reading's slice when unchanged, so a steady state allocates
// nothing.
func (g *gpuState) throttleReasons(at int64, reasons []string) []string {
	var buf [MaxThrottleReasons]string
	kept := buf[:0]
	for _, r := range reasons {
		if r != "" && len(r) <= MaxThrottleReasonLen && len(kept) < MaxThrottleReasons {
			kept = append(kept, r)
		}
	}
	slices.Sort(kept)
	kept = slices.Compact(kept)
	if prev, ok := g.throttle.latest(at); ok && slices.Equal(prev.v, kept) {
		return prev.v
	}
	stored := make([]string, len(kept))
	for i, r := range kept {
		stored[i] = strings.Clone(r) // not pinning the request buffer the name came from
	}
	return stored
}

// xidSeries returns the gpu.xid.errors series of a code and whether it was
// created now, or nil when the GPU already holds MaxXIDCodesPerGPU codes.
func (g *gpuState) xidSeries(code int) (*series[counterValue], bool) {
	for i := range g.xidCounters {
		if g.xidCounters[i].code == code {
			return &g.xidCounters[i].s, false
		}
	}
	if len(g.xidCounters) >= MaxXIDCodesPerGPU {
		return nil, false
	}
	g.xidCounters = append(g.xidCounters, xidSeries{code: code})
	return &g.xidCounters[len(g.xidCounters)-1].s, true
}

func toCounterValue(c Counter) counterValue {
	var start int64
	if !c.Start.IsZero() {
		start = c.Start.UnixNano()
	}
	return counterValue{v: c.Value, start: start}
}

func isFinite(f float64) bool {
	return !math.IsNaN(f) && !math.IsInf(f, 0)
}

var _ Inventory = (*MemoryStore)(nil)

// HasGPU reports whether uuid was recorded within the retention (wall
// clock), as expire would keep it: a GPU gone silent leaves the inventory.
func (s *MemoryStore) HasGPU(uuid string) bool {
	cutoff := s.now().Add(-s.limits.Retention)
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen, ok := s.gpus.lastSeen(uuid)
	return ok && !seen.Before(cutoff)
}

// GPUCount is how many GPUs were recorded within the retention.
func (s *MemoryStore) GPUCount() int {
	cutoff := s.now().Add(-s.limits.Retention)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gpus.countSince(cutoff)
}
