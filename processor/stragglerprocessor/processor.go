package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
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

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/periodic"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/straggler"
)

// Values this processor writes (README.md), its timings and its bounds.
const (
	// gatewayService is the service.name of the root and verdict spans.
	gatewayService = "otelcol-gpu-gateway"
	// verdictFlagged is the verdict of a rank flagged in this step only.
	verdictFlagged = "flagged"

	// flushEvery is how often open steps are checked against decision_wait.
	flushEvery = 100 * time.Millisecond
	// minSlowHistory is how many earlier steps the rolling mean needs before
	// step.slow can be true.
	minSlowHistory = 3
	// minDecidedMemory is the least number of decided steps a job remembers,
	// so that their late spans are recognised.
	minDecidedMemory = 64
	// internedPerHeldRank bounds the strings interned over all jobs to this
	// many per max_held_ranks (a rank has a host and a GPU); beyond it every
	// job's table is dropped and refilled.
	internedPerHeldRank = 2
)

// nameKind says which string of a rank record is interned.
type nameKind int

const (
	nameGroup nameKind = iota
	nameHost
	nameGPU
	nameKinds
)

// Reasons of the forced-decision and unjudged-span counters.
const (
	reasonMaxOpenSteps  = "max_open_steps_per_job"
	reasonMaxHeldRanks  = "max_held_ranks"
	reasonMaxJobs       = "max_jobs"
	reasonDuplicateRank = "duplicate_rank"
	reasonMaxRanks      = "max_ranks_per_step"
	reasonWaitNotSplit  = "wait_not_split"
)

// jobKey identifies a run of a job: a restarted job (a new attempt) replays
// step numbers, so it gets fresh state.
type jobKey struct {
	job     string
	attempt int64
}

// jobState is everything kept per job run.
type jobState struct {
	key      jobKey
	detector *straggler.Job // groups, own histories, share and persistence
	open     map[int64]*openStep
	lastUsed uint64 // the processor's use counter, for evicting the least recently seen job

	// names interns the job's groups, host names and GPU uuids, so that
	// the records of every open step share one copy of each; recent holds
	// the last of each kind, which the next rank (same stage, often the
	// same host) usually repeats.
	names  map[string]string
	recent [nameKinds]string
	// lastRanks is how many ranks the job's last decided step had: the
	// room a new step reserves for its records.
	lastRanks int

	// Recently decided steps, so that their late spans are recognised.
	decided      map[int64]struct{}
	decidedOrder []int64 // ring, oldest at decidedNext once full
	decidedNext  int
	decidedFloor int64 // the oldest remembered step once the ring is full

	// Rolling window of step durations for step.slow.
	durations    []time.Duration
	durationNext int
	durationSum  float64

	clocks clockCheck // its nodes' clocks (clocks.go)
	comm   commSplit  // whether its records separate the wait (commsplit.go)
}

// rankRecord is what an open step keeps of one rank's span: the signals of
// the decision and what a verdict span names. 104 bytes; the strings are
// interned per job, so they cost only their headers here. The trace id is
// the step's and is not kept.
type rankRecord struct {
	rank int64
	// compute is the compute signal (>= 0), or its bitwise complement
	// (< 0) when the record did not separate the collective wait from it
	// (waitSplit): see computeSignal.
	compute time.Duration
	// wait is the collective wait (>= 0), or its bitwise complement (< 0)
	// when the span reported hardware trouble: a flag without a 97th byte.
	wait time.Duration
	// commWait says where wait came from: waitNotTotal when from
	// training.phase.comm_wait_ns, waitNone when the span has no wait;
	// from nccl.collectives.total_ns, the span's
	// training.phase.comm_wait_ns, or waitTotalOnly without one
	// (consistentWaits chooses one source for a step and marks the ranks
	// without it waitExcluded).
	commWait   time.Duration
	start, end pcommon.Timestamp
	spanID     pcommon.SpanID // the rank span's own id, for the verdict span's link
	group      string         // training.pp_stage, "" without one
	host       string         // host.name, "" when unknown
	gpu        string         // gpu.uuid, "" when unknown
}

// openStep is one step of one job gathering its ranks.
type openStep struct {
	job       *jobState
	step      int64
	seq       uint64 // creation order
	deadline  time.Time
	worldSize int64
	records   []rankRecord
	seen      rankSet
	start     pcommon.Timestamp
	end       pcommon.Timestamp
	done      bool // decided; may still sit in the arrivals queue
}

// rankSet remembers the ranks of a step: a bitmap for ranks in
// [0, max_ranks_per_step), which are all of them in a well-formed job (a
// bit per rank: 2 KiB for 16,384 ranks), and a map for the rest.
type rankSet struct {
	bits  []uint64
	other map[int64]struct{}
}

// has reports whether rank was added; limit is the end of the bitmap's
// range, as for add.
func (s *rankSet) has(rank, limit int64) bool {
	if rank >= 0 && rank < limit {
		w := rank / 64
		return w < int64(len(s.bits)) && s.bits[w]&(1<<(uint64(rank)%64)) != 0
	}
	_, ok := s.other[rank]
	return ok
}

// add inserts rank: in the bitmap below limit, else in the map.
func (s *rankSet) add(rank, limit int64) {
	if rank < 0 || rank >= limit {
		if s.other == nil {
			s.other = map[int64]struct{}{}
		}
		s.other[rank] = struct{}{}
		return
	}
	w := int(rank / 64)
	if w >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
	}
	s.bits[w] |= 1 << (uint64(rank) % 64)
}

// effects collects what a locked section decided, to be sent and counted
// after the lock is released.
type effects struct {
	out      []ptrace.Traces
	late     int64
	unjudged map[string]int64
	forced   map[string]int64
	decided  int64
	// jobs named this time: clocks disagreeing, records without the wait
	// split out
	skewedJobs, blindJobs int64
}

func (e *effects) unjudge(reason string) { e.unjudgeN(reason, 1) }

func (e *effects) unjudgeN(reason string, n int64) {
	if n <= 0 {
		return
	}
	if e.unjudged == nil {
		e.unjudged = map[string]int64{}
	}
	e.unjudged[reason] += n
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
	arrivals []*openStep            // creation order, which is deadline order
	live     int                    // open steps
	held     int                    // rank records held or reserved in open steps
	interned int                    // strings interned over all jobs
	uses     uint64                 // counter behind jobState.lastUsed and openStep.seq
	samples  []straggler.RankSample // DecideStep's input, reused from step to step

	clockScratch clockScratch // checkClocks' work, reused from step to step

	// console gets every rank's judged step (nil: not configured); set by
	// Start before the first span.
	console console.Console

	loop periodic.Loop // the background flush, emission or evaluation
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

func (p *stragglerProcessor) Start(_ context.Context, host component.Host) error {
	id, err := p.cfg.consoleID()
	if err != nil {
		return fmt.Errorf("stragglerprocessor: %w", err)
	}
	if p.cfg.Console != "" {
		c, err := console.FromHost(host, id)
		if err != nil {
			return fmt.Errorf("stragglerprocessor: console: %w", err)
		}
		p.mu.Lock()
		p.console = c
		p.mu.Unlock()
	}
	p.loop.Start(min(flushEvery, p.cfg.DecisionWait), func(ctx context.Context) { p.flush(ctx, false) })
	return nil
}

// Shutdown decides every open step with the ranks it has and sends it, for
// at most periodic.FinalFlushTimeout (a correlator whose hand-off waits on a
// full gpu_faults queue must not hold the shutdown).
func (p *stragglerProcessor) Shutdown(ctx context.Context) error {
	p.loop.StopAndFlush(ctx, func(ctx context.Context) { p.flush(ctx, true) })
	return nil
}

// ConsumeTraces passes every span on at once, after noting the signals of
// the rank step spans in their open steps; the root and verdict spans of
// the steps this batch completed follow it.
func (p *stragglerProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	now := p.now()
	var eff effects
	p.mu.Lock()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var res steprecord.Attrs // the resource's, read at its first step span
		resRead := false
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				attrs := span.Attributes()
				if span.Name() != semconv.SpanTrainStep {
					removeVerdict(attrs)
					continue
				}
				var a steprecord.Attrs
				var x extraSignals
				if readStepSpan(&a, &x, attrs) {
					removeVerdict(attrs)
				}
				if !resRead {
					res.Read(rs.Resource().Attributes(), false)
					resRead = true
				}
				a.Inherit(&res)
				p.gather(&a, &x, span, now, &eff)
			}
		}
	}
	p.mu.Unlock()
	var err error
	if rss.Len() > 0 {
		err = p.next.ConsumeTraces(ctx, td)
	}
	p.emit(ctx, &eff)
	return err
}

// gather records a rank step span's signals in its open step. A span it
// leaves out (no identity, steprecord.Attrs.Identity; its step decided; its
// rank already reported; beyond max_ranks_per_step) has passed on all the
// same; the last three are counted.
func (p *stragglerProcessor) gather(a *steprecord.Attrs, x *extraSignals, span ptrace.Span, now time.Time, eff *effects) {
	id, err := a.Identity()
	if err != nil {
		return
	}
	step, rank := id.Step, id.Rank
	js := p.jobFor(jobKey{job: id.Job, attempt: id.Attempt}, eff)
	if js.isDecided(step) {
		eff.late++
		return
	}
	st := js.open[step]
	if st == nil {
		st = p.openStepFor(js, step, now, eff)
	}
	ranksLimit := int64(p.cfg.MaxRanksPerStep)
	if st.seen.has(rank, ranksLimit) {
		eff.unjudge(reasonDuplicateRank)
		return
	}
	if len(st.records) >= p.cfg.MaxRanksPerStep {
		eff.unjudge(reasonMaxRanks)
		return
	}
	st.seen.add(rank, ranksLimit)
	if a.Has(steprecord.FieldWorldSize) {
		st.worldSize = max(st.worldSize, a.Int(steprecord.FieldWorldSize))
	}
	compute, wait := signal(a, span)
	if waitSplit(a) {
		js.comm.split = true
	} else {
		compute = ^compute // its compute includes the wait (computeSignal)
	}
	commWait := waitNone
	if a.Has(steprecord.FieldPhaseCommWait) {
		commWait = waitNotTotal
	}
	if a.Has(steprecord.FieldCollectivesTotalNs) {
		commWait = waitTotalOnly
		if a.Has(steprecord.FieldPhaseCommWait) {
			commWait = time.Duration(max(a.Int(steprecord.FieldPhaseCommWait), 0))
		}
	}
	if x.hwTrouble {
		wait = ^wait
	}
	reserved := cap(st.records)
	st.records = append(st.records, rankRecord{
		rank:     rank,
		compute:  compute,
		wait:     wait,
		commWait: commWait,
		start:    span.StartTimestamp(),
		end:      span.EndTimestamp(),
		spanID:   span.SpanID(),
		group:    p.intern(js, nameGroup, a.Stage()),
		host:     p.intern(js, nameHost, a.Host()),
		gpu:      p.intern(js, nameGPU, a.GPU()),
	})
	p.held += cap(st.records) - reserved
	if len(st.records) == 1 || span.StartTimestamp() < st.start {
		st.start = span.StartTimestamp()
	}
	st.end = max(st.end, span.EndTimestamp())

	if st.worldSize > 0 && int64(len(st.records)) >= st.worldSize {
		p.decide(st, eff)
	}
	for p.held > p.cfg.MaxHeldRanks {
		oldest := p.oldestOpen()
		if oldest == nil {
			break
		}
		eff.force(reasonMaxHeldRanks)
		p.decide(oldest, eff)
	}
}

// intern returns the job's copy of s, adding one. Past the bound on
// interned strings every job's table is dropped: records keep the strings
// they hold, later ones are interned afresh.
func (p *stragglerProcessor) intern(js *jobState, kind nameKind, s string) string {
	if s == "" {
		return ""
	}
	if s == js.recent[kind] {
		return js.recent[kind]
	}
	if v, ok := js.names[s]; ok {
		js.recent[kind] = v
		return v
	}
	if p.interned >= internedPerHeldRank*p.cfg.MaxHeldRanks {
		for _, other := range p.jobs {
			other.names = map[string]string{}
		}
		p.interned = 0
	}
	s = strings.Clone(s) // not the batch's memory
	js.names[s] = s
	js.recent[kind] = s
	p.interned++
	return s
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
		p.interned -= len(victim.names)
		delete(p.jobs, victim.key)
	}
	js := &jobState{
		key:          key,
		detector:     straggler.NewJob(p.cfg.jobOptions()),
		open:         map[int64]*openStep{},
		lastUsed:     p.uses,
		names:        map[string]string{},
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
	st := &openStep{job: js, step: step, seq: p.uses, deadline: now.Add(p.cfg.DecisionWait)}
	// Room for as many ranks as the job's last step had, within
	// max_held_ranks: reserved records count as held.
	if room := min(js.lastRanks, p.cfg.MaxHeldRanks-p.held); room > 0 {
		st.records = make([]rankRecord, 0, room)
		p.held += room
	}
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
	if eff.skewedJobs > 0 {
		p.telemetry.JobsClockSkew.Add(ctx, eff.skewedJobs)
	}
	if eff.blindJobs > 0 {
		p.telemetry.JobsWithoutCommSplit.Add(ctx, eff.blindJobs)
	}
	for _, td := range eff.out {
		if err := p.next.ConsumeTraces(ctx, td); err != nil {
			p.logger.Warn("stragglerprocessor: decided step refused downstream", zap.Int("spans", td.SpanCount()), zap.Error(err))
		}
	}
}
