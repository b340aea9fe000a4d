package stepspanprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/periodic"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor/internal/metadata"
)

// flushEvery is the least time between two flushes. A flush runs when a
// held step or orphan collective is due (periodic.DueLoop), not on a
// ticker: an agent between steps has no wakeup of this processor.
const flushEvery = 100 * time.Millisecond

// stepKey identifies one rank's record of one step.
type stepKey struct {
	job     string
	attempt int64
	step    int64
	rank    int64
}

// openStep is a step span held for its rank's late collectives.
type openStep struct {
	key      stepKey
	td       ptrace.Traces // the span with its resource and scope, alone
	host     string
	start    time.Time
	end      time.Time
	deadline time.Time
	gone     bool // sent; still in the arrival queue until popped
}

// collective is one collective span of a rank, kept until a step claims it
// or it is forwarded as an orphan.
type collective struct {
	td     ptrace.Traces
	name   string
	start  time.Time
	end    time.Time
	failed bool
	// timed: the collective carries an enqueue and a completion time (it
	// completed and its end is after its start); a flight-recorder entry
	// seen only scheduled has neither.
	timed    bool
	arrived  time.Time
	claimed  bool
	resolved bool // sent on (under a step, or as an orphan) or dropped as summarised
}

type rankKey struct {
	host string
	rank int64
}

type stepSpanProcessor struct {
	cfg    *Config
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder
	next   consumer.Traces
	now    func() time.Time

	health nodestate.Store // nil: no health context

	mu          sync.Mutex
	steps       map[stepKey]*openStep
	arrivals    []*openStep // arrival order, for evicting the oldest in O(1)
	collectives map[rankKey][]*collective
	// held counts the collectives of every rank's list (max_collectives).
	held int
	// capWarned: ranks whose dropped collectives were logged already (the
	// counter has every drop; at most max_ranks entries).
	capWarned map[rankKey]bool

	loop periodic.DueLoop // the background flush, when something held is due
}

func newStepSpanProcessor(cfg *Config, set processor.Settings, next consumer.Traces) (*stepSpanProcessor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("stepspanprocessor: telemetry: %w", err)
	}
	return &stepSpanProcessor{
		cfg:         cfg,
		logger:      set.Logger,
		tb:          tb,
		capWarned:   map[rankKey]bool{},
		next:        next,
		now:         time.Now,
		steps:       map[stepKey]*openStep{},
		collectives: map[rankKey][]*collective{},
	}, nil
}

func (p *stepSpanProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (p *stepSpanProcessor) Start(_ context.Context, host component.Host) error {
	if p.cfg.NodeState != nil {
		store, err := nodestate.FromHost(host, *p.cfg.NodeState)
		if err != nil {
			return fmt.Errorf("stepspanprocessor: nodestate: %w", err)
		}
		p.health = store
	}
	p.loop.Start(flushEvery, func(ctx context.Context) time.Time { return p.flush(ctx, false) })
	return nil
}

// Shutdown sends everything held: steps with what they collected, and
// unclaimed collectives, for at most periodic.FinalFlushTimeout (a full
// queue downstream must not hold the shutdown).
func (p *stepSpanProcessor) Shutdown(ctx context.Context) error {
	p.loop.StopAndFlush(ctx, func(ctx context.Context) { _ = p.flush(ctx, true) })
	return nil
}

// ConsumeTraces sorts spans into steps (held), collectives (kept for the
// steps) and everything else (sent on at once).
func (p *stepSpanProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	now := p.now()
	var evicted []*openStep
	p.mu.Lock()
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		res := rs.Resource().Attributes()
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(span ptrace.Span) bool {
				switch {
				case span.Name() == semconv.SpanTrainStep:
					if s := p.holdStep(res, ss.Scope(), span, now); s != nil {
						evicted = append(evicted, s)
					}
					return true
				case isCollective(span):
					p.keepCollective(res, ss.Scope(), span, now)
					return true
				}
				return false
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	p.mu.Unlock()
	for _, s := range evicted {
		p.sendStep(ctx, s)
	}
	if td.SpanCount() == 0 {
		return nil
	}
	return p.next.ConsumeTraces(ctx, td)
}

func isCollective(span ptrace.Span) bool {
	src, ok := span.Attributes().Get(semconv.AttrNCCLSource)
	return ok && (src.Str() == semconv.NCCLSourceFlightRecorder || src.Str() == semconv.NCCLSourceInspector)
}

// strAttr reads a string attribute from the span, then the resource.
func strAttr(span, res pcommon.Map, key string) string {
	for _, m := range []pcommon.Map{span, res} {
		if v, ok := m.Get(key); ok && v.Type() == pcommon.ValueTypeStr {
			return v.Str()
		}
	}
	return ""
}

// holdStep gives a rank's step span the contract's ids and holds it for
// collective_wait. A span without an identity (steprecord) keeps its own
// ids (and is still held, so it leaves in order, with its rank's
// collectives when it names a rank). It returns a step evicted by the
// max_open_steps bound, to be sent at once.
func (p *stepSpanProcessor) holdStep(res pcommon.Map, scope pcommon.InstrumentationScope, span ptrace.Span, now time.Time) *openStep {
	attrs := span.Attributes()
	p.capStrings(attrs)
	rec := steprecord.Read(attrs, res)
	key := stepKey{job: rec.Job(), attempt: rec.Int(steprecord.FieldAttempt), step: rec.Int(steprecord.FieldStep), rank: -1}
	if rec.Has(steprecord.FieldRank) {
		key.rank = rec.Int(steprecord.FieldRank)
	}
	if id, err := rec.Identity(); err == nil {
		span.SetTraceID(id.TraceID())
		span.SetSpanID(id.RankSpanID())
		span.SetParentSpanID(id.RootSpanID())
	} else {
		p.logger.Debug("stepspanprocessor: a step span without the contract's identity keeps its ids", zap.Error(err))
	}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	res.CopyTo(rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	scope.CopyTo(ss.Scope())
	span.CopyTo(ss.Spans().AppendEmpty())
	s := &openStep{
		key:      key,
		td:       td,
		host:     strAttr(res, res, semconv.AttrHostName),
		start:    span.StartTimestamp().AsTime(),
		end:      span.EndTimestamp().AsTime(),
		deadline: now.Add(p.cfg.CollectiveWait),
	}
	p.arrivals = append(p.arrivals, s)
	p.loop.Due(s.deadline)
	if old, dup := p.steps[key]; dup {
		// The same rank's step again (a replay after an agent restart):
		// the newest record wins, the older is sent as it is.
		p.steps[key] = s
		old.gone = true
		return old
	}
	p.steps[key] = s
	if len(p.steps) > p.cfg.MaxOpenSteps {
		return p.evictOldestStep()
	}
	return nil
}

// evictOldestStep removes the step that arrived first and is still held.
func (p *stepSpanProcessor) evictOldestStep() *openStep {
	for len(p.arrivals) > 0 {
		s := p.arrivals[0]
		p.arrivals[0] = nil
		p.arrivals = p.arrivals[1:]
		if !s.gone {
			s.gone = true
			delete(p.steps, s.key)
			return s
		}
	}
	return nil
}

// compactArrivals drops sent steps from the arrival queue so that it stays
// the size of what is held.
func (p *stepSpanProcessor) compactArrivals() {
	kept := p.arrivals[:0]
	for _, s := range p.arrivals {
		if !s.gone {
			kept = append(kept, s)
		}
	}
	clear(p.arrivals[len(kept):])
	p.arrivals = kept
}

// capStrings truncates string attributes over max_attribute_bytes: a
// script's bug must not become the collector's memory problem.
func (p *stepSpanProcessor) capStrings(m pcommon.Map) {
	limit := p.cfg.MaxAttributeBytes
	m.Range(func(k string, v pcommon.Value) bool {
		if v.Type() == pcommon.ValueTypeStr && len(v.Str()) > limit {
			v.SetStr(v.Str()[:limit])
		}
		return true
	})
}

// keepCollective stores a collective span of a rank (its resource's
// training.rank, 0 without one) for the steps. Two bounds: a rank keeps at
// most max_collectives_per_rank, and all ranks together max_collectives,
// each rank its share of it (max_collectives over the ranks held), so that
// the memory held is the node's bound whatever the number of ranks. What a
// bound pushes out is the oldest of the rank over its share, counted.
func (p *stepSpanProcessor) keepCollective(res pcommon.Map, scope pcommon.InstrumentationScope, span ptrace.Span, now time.Time) {
	var rank int64
	if v, ok := res.Get(semconv.AttrTrainingRank); ok {
		rank, _ = steprecord.Int(v)
	}
	rk := rankKey{host: strAttr(res, res, semconv.AttrHostName), rank: rank}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	res.CopyTo(rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	scope.CopyTo(ss.Scope())
	span.CopyTo(ss.Spans().AppendEmpty())
	c := &collective{
		td:      td,
		name:    span.Name(),
		start:   span.StartTimestamp().AsTime(),
		end:     span.EndTimestamp().AsTime(),
		failed:  span.Status().Code() == ptrace.StatusCodeError,
		arrived: now,
	}
	c.timed = hasTimes(span, c)
	list := p.collectives[rk]
	if list == nil && len(p.collectives) >= p.cfg.MaxRanks {
		p.logger.Debug("stepspanprocessor: too many ranks, forwarding a collective unsummarised", zap.Int64("rank", rank))
		c.resolved = true // the flush forwards it below
	}
	if c.resolved {
		p.loop.Due(now)
	} else {
		p.loop.Due(now.Add(p.cfg.OrphanAfter))
	}
	ranks := len(p.collectives)
	if list == nil {
		ranks++
	}
	list = append(list, c)
	p.held++
	over, why := len(list)-p.cfg.MaxCollectivesPerRank, metadata.ReasonPerRankCap
	if p.held > p.cfg.MaxCollectives {
		if share := max(1, p.cfg.MaxCollectives/ranks); len(list) > share {
			over, why = max(over, len(list)-share), metadata.ReasonNodeCap
		} else {
			p.dropOldestOfLargest(rk)
		}
	}
	if over > 0 {
		list = p.dropOldest(rk, list, over, why)
	}
	p.collectives[rk] = list
}

// dropOldest removes the n oldest collectives of rk's list and counts them.
// What is cut off is cleared: the array behind the slice would otherwise
// keep the dropped spans alive until the rank's list grows again.
func (p *stepSpanProcessor) dropOldest(rk rankKey, list []*collective, n int, why string) []*collective {
	clear(list[:n])
	p.held -= n
	p.dropped(rk, n, why)
	return list[n:]
}

// dropOldestOfLargest makes room for a rank under its share of
// max_collectives: the rank holding the most (not rk) gives its oldest.
func (p *stepSpanProcessor) dropOldestOfLargest(rk rankKey) {
	var (
		largest rankKey
		n       int
	)
	for k, list := range p.collectives {
		if k != rk && len(list) > n {
			largest, n = k, len(list)
		}
	}
	if n == 0 {
		return
	}
	p.collectives[largest] = p.dropOldest(largest, p.collectives[largest], 1, metadata.ReasonNodeCap)
}

// flush sends steps whose wait is over (all of them when final) with the
// summary of their collectives, and forwards orphan collectives. It
// returns when what it still holds is next due (zero: nothing held).
func (p *stepSpanProcessor) flush(ctx context.Context, final bool) time.Time {
	now := p.now()
	p.mu.Lock()
	var due []*openStep
	for k, s := range p.steps {
		if final || !now.Before(s.deadline) {
			due = append(due, s)
			s.gone = true
			delete(p.steps, k)
		}
	}
	if len(due) > 0 {
		p.compactArrivals()
	}
	sort.Slice(due, func(i, j int) bool { return due[i].start.Before(due[j].start) })
	var out []ptrace.Traces
	for _, s := range due {
		out = append(out, p.summarise(s)...)
	}
	var next time.Time
	earliest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, s := range p.steps {
		earliest(s.deadline)
	}
	p.held = 0
	for rk, list := range p.collectives {
		kept := list[:0]
		for _, c := range list {
			switch {
			case c.claimed:
				continue // summarised (anomalies went out with their step)
			case final || c.resolved || now.Sub(c.arrived) >= p.cfg.OrphanAfter:
				out = append(out, c.td) // no step claimed it: send it as it is
			default:
				kept = append(kept, c)
				earliest(c.arrived.Add(p.cfg.OrphanAfter))
			}
		}
		clear(list[len(kept):]) // what went out or was claimed
		p.held += len(kept)
		if len(kept) == 0 {
			delete(p.collectives, rk)
		} else {
			p.collectives[rk] = kept
		}
	}
	p.mu.Unlock()
	for _, td := range out {
		p.send(ctx, td)
	}
	return next
}

// summarise folds the collectives of the step's rank that ran within the
// step into attributes of the step span, and returns the step plus its
// anomalous collectives re-parented under it. The caller holds p.mu.
func (p *stepSpanProcessor) summarise(s *openStep) []ptrace.Traces {
	span := s.td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	list := p.collectives[rankKey{host: s.host, rank: s.key.rank}]
	medians := medianDurations(list)
	var (
		sum  steprecord.Collectives
		tail tailWait
		out  = []ptrace.Traces{s.td}
	)
	for _, c := range list {
		if c.claimed || c.start.Before(s.start) || c.start.After(s.end) {
			continue
		}
		c.claimed = true
		tail.add(c)
		d := c.end.Sub(c.start)
		sum.Count++
		sum.Total += d
		if d > sum.Longest {
			sum.Longest, sum.LongestName = d, c.name
		}
		// Offsets within this rank's own clock: the step's start and the
		// collective's enqueue come from the same host.
		sum.Offsets = append(sum.Offsets, int64(c.start.Sub(s.start)))
		if c.failed || (medians[c.name] > 0 && float64(d) > p.cfg.AnomalyFactor*float64(medians[c.name])) {
			cs := c.td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			cs.SetTraceID(span.TraceID())
			cs.SetParentSpanID(span.SpanID())
			out = append(out, c.td)
		}
	}
	a := span.Attributes()
	sum.Anomalies = int64(len(out) - 1)
	steprecord.PutCollectives(a, sum)
	if d, ok := tail.wait(); ok {
		a.PutInt(semconv.AttrCollectivesTailNs, int64(d))
	}
	if p.health != nil {
		putHealth(p.health, p.cfg.HealthWindow, s.td.ResourceSpans().At(0).Resource().Attributes(), a, s.start, s.end)
	}
	return out
}

// hasTimes reports whether a collective span carries an enqueue (its
// start) and a completion (its end): not failed (timed out, or seen only
// scheduled or started), completed when it says its state, and an end after
// its start. The ncclflight receiver ends a span without a duration or a
// discovered completion at its start.
func hasTimes(span ptrace.Span, c *collective) bool {
	if c.failed || !c.end.After(c.start) {
		return false
	}
	if v, ok := span.Attributes().Get(semconv.AttrNCCLState); ok && v.Str() != "completed" {
		return false
	}
	return true
}

// tailWait finds a rank's exposed collective wait in a step as the flight
// recorder or the inspector shows it (nccl.collectives.tail_ns): from the
// enqueue of the rank's last-enqueued collective of the step to the
// completion of the step's last-completing one. A rank that finished its
// compute early enqueues its last gradient bucket early and waits for the
// slowest peer: its tail is about that peer's extra compute. The slowest
// rank enqueues last and waits only for the transfer: its tail is about 0.
// Both times are the rank's own host clock.
type tailWait struct {
	n          int
	untimed    bool
	lastEnq    time.Time
	lastFinish time.Time
}

func (t *tailWait) add(c *collective) {
	t.n++
	if !c.timed {
		t.untimed = true
		return
	}
	if c.start.After(t.lastEnq) {
		t.lastEnq = c.start
	}
	if c.end.After(t.lastFinish) {
		t.lastFinish = c.end
	}
}

// wait is the tail, >= 0; ok is false when the step had no collective or
// one of them carries no times (the last one might be it).
func (t *tailWait) wait() (time.Duration, bool) {
	if t.n == 0 || t.untimed {
		return 0, false
	}
	return max(0, t.lastFinish.Sub(t.lastEnq)), true
}

// medianDurations is each collective kind's median duration on a rank: the
// rank's usual, against which a slow one stands out.
func medianDurations(list []*collective) map[string]time.Duration {
	byName := map[string][]time.Duration{}
	for _, c := range list {
		byName[c.name] = append(byName[c.name], c.end.Sub(c.start))
	}
	med := make(map[string]time.Duration, len(byName))
	for name, ds := range byName {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		med[name] = ds[len(ds)/2]
	}
	return med
}

// sendStep sends a step without waiting (evicted by a bound).
func (p *stepSpanProcessor) sendStep(ctx context.Context, s *openStep) {
	p.mu.Lock()
	out := p.summarise(s)
	p.mu.Unlock()
	for _, td := range out {
		p.send(ctx, td)
	}
}

// send passes traces on with training.job.id in the client metadata, so the
// kafka exporter keys them by job.
func (p *stepSpanProcessor) send(ctx context.Context, td ptrace.Traces) {
	res := td.ResourceSpans().At(0).Resource().Attributes()
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	if job := strAttr(span.Attributes(), res, semconv.AttrTrainingJobID); job != "" {
		info := client.FromContext(ctx)
		md := map[string][]string{semconv.AttrTrainingJobID: {job}}
		for k := range info.Metadata.Keys() {
			if k != semconv.AttrTrainingJobID {
				md[k] = info.Metadata.Get(k)
			}
		}
		info.Metadata = client.NewMetadata(md)
		ctx = client.NewContext(ctx, info)
	}
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.logger.Warn("stepspanprocessor: spans refused downstream", zap.Int("spans", td.SpanCount()), zap.Error(err))
	}
}

// dropped counts collectives of rk that no step claimed before a cap
// (why: the rank's or the node's) pushed them out, and logs the first time
// per rank (the count goes on in the counter, which log sampling cannot
// hide). Callers hold p.mu.
func (p *stepSpanProcessor) dropped(rk rankKey, n int, why string) {
	p.tb.ProcessorStepspanCollectivesDropped.Add(context.Background(), int64(n),
		metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, why))))
	if p.capWarned[rk] {
		return
	}
	if len(p.capWarned) >= p.cfg.MaxRanks {
		clear(p.capWarned)
	}
	p.capWarned[rk] = true
	p.logger.Warn("stepspanprocessor: a rank holds more unclaimed collectives than max_collectives_per_rank, or than its share of max_collectives; dropping the oldest (otelcol_processor_stepspan_collectives_dropped)",
		zap.String(semconv.AttrHostName, rk.host), zap.Int64(semconv.AttrTrainingRank, rk.rank), zap.String("reason", why),
		zap.Int("max_collectives_per_rank", p.cfg.MaxCollectivesPerRank), zap.Int("max_collectives", p.cfg.MaxCollectives))
}
