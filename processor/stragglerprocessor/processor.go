package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/straggler"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"
)

// Names of the training contract (docs/training-scripts.md) and of what
// this processor writes (README.md).
const (
	stepSpanName    = "train.step"
	rootSpanName    = "train.step.root"
	gatewayService  = "otelcol-gpu-gateway"
	attrServiceName = "service.name"
	attrAttempt     = "training.attempt"
	attrPPStage     = "training.pp_stage"
	attrCollTotalNs = "nccl.collectives.total_ns"

	attrScore         = "straggler.score"
	attrVerdict       = "straggler.verdict"
	attrFlaggedRanks  = "straggler.flagged_ranks"
	attrStepMean      = "step.mean_ns"
	attrStepMedian    = "step.median_ns"
	attrStepP99       = "step.p99_ns"
	attrStepMax       = "step.max_ns"
	attrSlowestRank   = "step.slowest_rank"
	attrRanksReported = "step.ranks_reported"
	attrStepSlow      = "step.slow"

	verdictNone    = "none"
	verdictFlagged = "flagged"

	// flushEvery is how often open steps are checked against decision_wait.
	flushEvery = 100 * time.Millisecond
	// minSlowHistory is how many earlier steps the rolling mean needs before
	// step.slow can be true.
	minSlowHistory = 3
	// minDecidedMemory is the least number of decided steps a job remembers,
	// so that their late spans are recognised.
	minDecidedMemory = 64
)

// phaseAttrs are the phase durations whose sum is a rank's compute time.
// The data-loading phase counts: a rank whose input pipeline is slow holds
// every peer back just as a slow GPU does, and it is the rank's own time,
// not time spent waiting for peers.
var phaseAttrs = [...]string{
	"training.phase.dataload_ns",
	"training.phase.forward_ns",
	"training.phase.backward_ns",
	"training.phase.optimizer_ns",
}

// Reasons of the forced-decision and unjudged-span counters.
const (
	reasonMaxOpenSteps  = "max_open_steps_per_job"
	reasonMaxHeldSpans  = "max_held_spans"
	reasonMaxJobs       = "max_jobs"
	reasonDuplicateRank = "duplicate_rank"
	reasonMaxRanks      = "max_ranks_per_step"
)

// jobKey identifies a run of a job: a restarted job (a new attempt) replays
// step numbers, so it gets fresh state.
type jobKey struct {
	job     string
	attempt int64
}

// jobState is everything kept per job run.
type jobState struct {
	key         jobKey
	persistence *straggler.Persistence
	open        map[int64]*openStep
	lastUsed    uint64 // the processor's use counter, for evicting the least recently seen job

	// Recently decided steps, so that their late spans pass through.
	decided      map[int64]struct{}
	decidedOrder []int64 // ring, oldest at decidedNext once full
	decidedNext  int
	decidedFloor int64 // the oldest remembered step once the ring is full

	// Rolling window of step durations for step.slow.
	durations    []time.Duration
	durationNext int
	durationSum  float64
}

// openStep is one step of one job gathering its ranks.
type openStep struct {
	job       *jobState
	step      int64
	seq       uint64 // creation order
	deadline  time.Time
	worldSize int64
	ranks     map[int64]struct{}
	samples   []straggler.RankSample
	spans     []ptrace.ResourceSpans // one rank span each, same index as samples
	start     pcommon.Timestamp
	end       pcommon.Timestamp
	done      bool // decided; may still sit in the arrivals queue
}

// effects collects what a locked section decided, to be sent and counted
// after the lock is released.
type effects struct {
	out      []ptrace.Traces
	late     int64
	unjudged map[string]int64
	forced   map[string]int64
	decided  int64
}

func (e *effects) unjudge(reason string) {
	if e.unjudged == nil {
		e.unjudged = map[string]int64{}
	}
	e.unjudged[reason]++
}

func (e *effects) force(reason string) {
	if e.forced == nil {
		e.forced = map[string]int64{}
	}
	e.forced[reason]++
}

type stragglerProcessor struct {
	cfg       *Config
	logger    *zap.Logger
	next      consumer.Traces
	telemetry *metadata.TelemetryBuilder
	detect    straggler.Options
	now       func() time.Time

	mu       sync.Mutex
	jobs     map[jobKey]*jobState
	arrivals []*openStep // creation order, which is deadline order
	live     int         // open steps
	held     int         // rank spans held in open steps
	uses     uint64      // counter behind jobState.lastUsed and openStep.seq

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newStragglerProcessor(cfg *Config, set processor.Settings, next consumer.Traces) (*stragglerProcessor, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("stragglerprocessor: telemetry: %w", err)
	}
	return &stragglerProcessor{
		cfg:       cfg,
		logger:    set.Logger,
		next:      next,
		telemetry: tb,
		detect:    cfg.detectionOptions(),
		now:       time.Now,
		jobs:      map[jobKey]*jobState{},
	}, nil
}

func (p *stragglerProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

func (p *stragglerProcessor) Start(context.Context, component.Host) error {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(min(flushEvery, p.cfg.DecisionWait))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.flush(ctx, false)
			}
		}
	}()
	return nil
}

// Shutdown decides every open step with the ranks it has and sends it.
func (p *stragglerProcessor) Shutdown(ctx context.Context) error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	p.flush(ctx, true)
	return nil
}

// ConsumeTraces holds rank step spans until their step is decided and
// passes everything else on at once.
func (p *stragglerProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	now := p.now()
	var eff effects
	p.mu.Lock()
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(span ptrace.Span) bool {
				return span.Name() == stepSpanName && p.gather(rs.Resource(), ss.Scope(), span, now, &eff)
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
	p.mu.Unlock()
	p.emit(ctx, &eff)
	if td.SpanCount() == 0 {
		return nil
	}
	return p.next.ConsumeTraces(ctx, td)
}

// gather adds a rank step span to its step and reports whether it was held.
// Spans it does not hold (no job, step or rank; late; over a bound) pass on
// unannotated.
func (p *stragglerProcessor) gather(res pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span, now time.Time, eff *effects) bool {
	attrs, resAttrs := span.Attributes(), res.Attributes()
	// Only this processor's decision may say who straggles.
	attrs.Remove(attrScore)
	attrs.Remove(attrVerdict)
	job := strAttr(attrs, resAttrs, semconv.AttrTrainingJobID)
	step, hasStep := intAttr(attrs, resAttrs, semconv.AttrIterationStep)
	rank, hasRank := intAttr(attrs, resAttrs, semconv.AttrTrainingRank)
	if job == "" || !hasStep || !hasRank {
		return false
	}
	attempt, _ := intAttr(attrs, resAttrs, attrAttempt)
	js := p.jobFor(jobKey{job: job, attempt: attempt}, eff)
	if js.isDecided(step) {
		eff.late++
		return false
	}
	st := js.open[step]
	if st == nil {
		st = p.openStepFor(js, step, now, eff)
	}
	if _, dup := st.ranks[rank]; dup {
		eff.unjudge(reasonDuplicateRank)
		return false
	}
	if len(st.samples) >= p.cfg.MaxRanksPerStep {
		eff.unjudge(reasonMaxRanks)
		return false
	}
	if ws, ok := intAttr(attrs, resAttrs, semconv.AttrTrainingWorldSize); ok {
		st.worldSize = max(st.worldSize, ws)
	}
	compute, wait := signal(span)
	st.ranks[rank] = struct{}{}
	st.samples = append(st.samples, straggler.RankSample{
		Rank:           int(rank),
		Group:          groupOf(attrs, resAttrs),
		Compute:        compute,
		CollectiveWait: wait,
	})
	held := ptrace.NewResourceSpans()
	res.CopyTo(held.Resource())
	ss := held.ScopeSpans().AppendEmpty()
	scope.CopyTo(ss.Scope())
	span.CopyTo(ss.Spans().AppendEmpty())
	st.spans = append(st.spans, held)
	if len(st.spans) == 1 || span.StartTimestamp() < st.start {
		st.start = span.StartTimestamp()
	}
	st.end = max(st.end, span.EndTimestamp())
	p.held++

	if st.worldSize > 0 && int64(len(st.samples)) >= st.worldSize {
		p.decide(st, eff)
	}
	for p.held > p.cfg.MaxHeldSpans {
		oldest := p.oldestOpen()
		if oldest == nil {
			break
		}
		eff.force(reasonMaxHeldSpans)
		p.decide(oldest, eff)
	}
	return true
}

// jobFor returns the job's state, creating it (and evicting the least
// recently seen job beyond max_jobs).
func (p *stragglerProcessor) jobFor(key jobKey, eff *effects) *jobState {
	p.uses++
	if js := p.jobs[key]; js != nil {
		js.lastUsed = p.uses
		return js
	}
	if len(p.jobs) >= p.cfg.MaxJobs {
		var victim *jobState
		for _, js := range p.jobs {
			if victim == nil || js.lastUsed < victim.lastUsed {
				victim = js
			}
		}
		for _, st := range sortedOpen(victim) {
			eff.force(reasonMaxJobs)
			p.decide(st, eff)
		}
		delete(p.jobs, victim.key)
	}
	js := &jobState{
		key:          key,
		persistence:  straggler.NewPersistence(p.cfg.persistenceOptions()),
		open:         map[int64]*openStep{},
		lastUsed:     p.uses,
		decided:      map[int64]struct{}{},
		decidedOrder: make([]int64, 0, max(minDecidedMemory, 4*p.cfg.MaxOpenStepsPerJob)),
		durations:    make([]time.Duration, 0, p.cfg.SlowStepWindow),
	}
	p.jobs[key] = js
	return js
}

// openStepFor opens a step of the job, deciding the job's oldest open step
// beyond max_open_steps_per_job.
func (p *stragglerProcessor) openStepFor(js *jobState, step int64, now time.Time, eff *effects) *openStep {
	if len(js.open) >= p.cfg.MaxOpenStepsPerJob {
		eff.force(reasonMaxOpenSteps)
		p.decide(sortedOpen(js)[0], eff)
	}
	p.uses++
	st := &openStep{job: js, step: step, seq: p.uses, deadline: now.Add(p.cfg.DecisionWait), ranks: map[int64]struct{}{}}
	js.open[step] = st
	p.live++
	p.arrivals = append(p.arrivals, st)
	if len(p.arrivals) > 2*p.live+1024 {
		p.arrivals = slices.DeleteFunc(p.arrivals, func(s *openStep) bool { return s.done })
	}
	return st
}

// sortedOpen returns the job's open steps, oldest first.
func sortedOpen(js *jobState) []*openStep {
	out := make([]*openStep, 0, len(js.open))
	for _, st := range js.open {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *openStep) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// oldestOpen pops decided steps off the arrivals queue and returns the
// oldest open step, nil when none is open.
func (p *stragglerProcessor) oldestOpen() *openStep {
	for len(p.arrivals) > 0 {
		if st := p.arrivals[0]; !st.done {
			return st
		}
		p.arrivals[0] = nil
		p.arrivals = p.arrivals[1:]
	}
	return nil
}

// flush decides the steps whose decision_wait passed; final decides all.
func (p *stragglerProcessor) flush(ctx context.Context, final bool) {
	now := p.now()
	var eff effects
	p.mu.Lock()
	for st := p.oldestOpen(); st != nil && (final || !now.Before(st.deadline)); st = p.oldestOpen() {
		p.decide(st, &eff)
	}
	p.mu.Unlock()
	p.emit(ctx, &eff)
}

// emit counts what a locked section did and sends the decided steps.
func (p *stragglerProcessor) emit(ctx context.Context, eff *effects) {
	if eff.late > 0 {
		p.telemetry.LateSpans.Add(ctx, eff.late)
	}
	for reason, n := range eff.unjudged {
		p.telemetry.UnjudgedSpans.Add(ctx, n, metric.WithAttributes(attribute.String(metadata.TelemetryAttrReason, reason)))
	}
	for reason, n := range eff.forced {
		p.telemetry.ForcedDecisions.Add(ctx, n, metric.WithAttributes(attribute.String(metadata.TelemetryAttrReason, reason)))
	}
	if eff.decided > 0 {
		p.telemetry.StepsDecided.Add(ctx, eff.decided)
	}
	for _, td := range eff.out {
		if err := p.next.ConsumeTraces(ctx, td); err != nil {
			p.logger.Warn("stragglerprocessor: decided step refused downstream", zap.Int("spans", td.SpanCount()), zap.Error(err))
		}
	}
}
