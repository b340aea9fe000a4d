package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/straggler"
)

// decide closes a step: scores its ranks, updates the job's persistence and
// queues the step's root span with a verdict span for every rank that has a
// verdict.
func (p *stragglerProcessor) decide(st *openStep, eff *effects) {
	js := st.job
	st.done = true
	delete(js.open, st.step)
	p.live--
	p.held -= cap(st.records)
	js.lastRanks = len(st.records)
	js.markDecided(st.step)
	eff.decided++
	p.checkClocks(st, eff)
	p.checkCommSplit(js, eff)

	samples := p.samples[:0]
	consistentWaits(st.records)
	judged := comparableComputes(st.records)
	eff.unjudgeN(reasonWaitNotSplit, int64(len(st.records)-judged))
	for i := range st.records[:judged] {
		r := &st.records[i]
		wait, hw := r.collectiveWait()
		compute, _ := r.computeSignal()
		samples = append(samples, straggler.RankSample{Rank: int(r.rank), Group: r.group, Compute: compute, CollectiveWait: wait,
			NoWait: r.commWait == waitExcluded, HardwareTrouble: hw, StartUnixNano: int64(ownStart(st, r))})
	}
	jd := js.detector.Decide(st.step, samples, int64(st.start))
	d := jd.StepDecision
	clear(samples) // the scratch outlives the step; its strings need not
	p.samples = samples[:0]
	for _, tr := range jd.Transitions {
		p.logTransition(js.key, tr)
	}
	if jd.JobTransition != 0 {
		p.logJobTransition(js.key, jd)
	}

	var stepDuration time.Duration
	if st.end > st.start {
		stepDuration = time.Duration(min(uint64(st.end-st.start), math.MaxInt64))
	}
	key := js.key
	ids := stepIDs{trace: steprecord.TraceID(key.job, key.attempt, st.step), root: steprecord.RootSpanID(key.job, key.attempt, st.step)}
	td := ptrace.NewTraces()
	root := p.appendRoot(td, st, ids, d.Summary, len(d.Flags), js.observeDuration(stepDuration, p.cfg.SlowStepFactor))
	if jd.JobVerdict != nil && jd.JobTransition != straggler.VerdictResolved {
		root.PutStr(semconv.AttrStragglerJobVerdict, semconv.VerdictJobSlowdown)
		root.PutInt(semconv.AttrStragglerOnsetStep, jd.JobVerdict.OnsetStep)
		root.PutInt(semconv.AttrStragglerOnsetUnixNano, jd.JobVerdict.OnsetUnixNano)
	}
	if jd.JobVerdict != nil || jd.ShareExceeded {
		root.PutDouble(semconv.AttrStragglerSlowShare, jd.SlowShare)
	}

	open := js.detector.Open() // sorted by rank
	flags := d.Flags           // in sample order, one per flagged rank
	for i := range st.records {
		var res *straggler.RankResult
		if i < judged {
			res = &d.Ranks[i]
		} else {
			res = &straggler.RankResult{Rank: int(st.records[i].rank)} // not judged this step
		}
		var flag *straggler.Flag
		verdict := ""
		if res.Flagged && len(flags) > 0 {
			flag, flags = &flags[0], flags[1:]
			verdict = verdictFlagged
		}
		var onset *straggler.Verdict
		if j, ok := slices.BinarySearchFunc(open, res.Rank, func(v straggler.Verdict, rank int) int { return cmp.Compare(v.Rank, rank) }); ok {
			verdict = semconv.StragglerVerdictPrefix + open[j].Kind.String()
			onset = &open[j]
		}
		if verdict != "" {
			appendVerdict(td, st, ids, &st.records[i], res.Score, verdict, flag, onset)
		}
		if p.console != nil {
			p.recordStep(st, &st.records[i], res.Score, verdict)
		}
	}
	st.records, st.seen = nil, rankSet{}
	eff.out = append(eff.out, td)
}

// ownStart is the rank's own start of the step on its node's clock, or the
// step's start (the earliest of its ranks') when the span has none.
func ownStart(st *openStep, r *rankRecord) pcommon.Timestamp {
	if r.start != 0 {
		return r.start
	}
	return st.start
}

// recordStep gives the console one rank's judged step: the signal the
// test compared (compute), the rank span's duration and its verdict ("":
// none) and score. The console never blocks (console.Console), so this
// runs under p.mu, in rank order, as the step is decided.
func (p *stragglerProcessor) recordStep(st *openStep, r *rankRecord, score float64, verdict string) {
	compute, _ := r.computeSignal()
	var dur time.Duration
	if r.end > r.start {
		dur = time.Duration(min(uint64(r.end-r.start), math.MaxInt64))
	}
	p.console.RecordStep(console.Step{Job: st.job.key.job, Attempt: st.job.key.attempt, Step: st.step, Rank: r.rank,
		Node: r.host, Compute: compute, Duration: dur, Verdict: verdict, Score: score, NoCommSplit: st.job.comm.blind()})
}

// stepIDs are the contract's ids of a step (internal/steprecord).
type stepIDs struct {
	trace pcommon.TraceID
	root  pcommon.SpanID
}

// verdictIDMask turns the contract's id of a rank's step span into the id
// of its verdict span: XOR with a non-zero mask (the bytes of "verdict!"),
// so the two always differ.
const verdictIDMask = 0x7665726469637421

// verdictSpanID is steprecord.RankSpanID XOR verdictIDMask. Should that equal
// the rank span's actual id (a script that chose its own ids, by a 2^-64
// chance) or be all zero (invalid), one bit more is flipped.
func verdictSpanID(key jobKey, step, rank int64, rankSpanID pcommon.SpanID) pcommon.SpanID {
	id := steprecord.RankSpanID(key.job, key.attempt, step, rank)
	binary.BigEndian.PutUint64(id[:], binary.BigEndian.Uint64(id[:])^verdictIDMask)
	if id == rankSpanID || id.IsEmpty() {
		id[7] ^= 1
	}
	return id
}

// appendVerdict writes one rank's verdict span: a child of the step's root,
// over the rank span's time, linked to the rank span.
// An open verdict's span names the episode's onset step and the rank's own
// start of it in data time, on its node's clock (straggler.onset_*); a
// flagged-only span names this step and the rank's own start of it.
func appendVerdict(td ptrace.Traces, st *openStep, ids stepIDs, r *rankRecord, score float64, verdict string, flag *straggler.Flag, open *straggler.Verdict) {
	key := st.job.key
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	res.PutStr(semconv.AttrTrainingJobID, key.job)
	res.PutStr(semconv.AttrServiceName, gatewayService)
	if r.host != "" {
		res.PutStr(semconv.AttrHostName, r.host)
	}
	if r.gpu != "" {
		res.PutStr(semconv.AttrGPUUUID, r.gpu)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName)
	span := ss.Spans().AppendEmpty()
	span.SetName(semconv.SpanTrainStepVerdict)
	span.SetKind(ptrace.SpanKindInternal)
	span.SetTraceID(ids.trace)
	span.SetParentSpanID(ids.root)
	span.SetSpanID(verdictSpanID(key, st.step, r.rank, r.spanID))
	span.SetStartTimestamp(r.start)
	span.SetEndTimestamp(r.end)
	a := span.Attributes()
	a.EnsureCapacity(13)
	steprecord.PutIdentity(a, steprecord.Identity{Job: key.job, Attempt: key.attempt, Step: st.step, Rank: r.rank})
	if r.group != "" {
		steprecord.PutStage(a, r.group)
	}
	if r.host != "" {
		a.PutStr(semconv.AttrHostName, r.host)
	}
	if r.gpu != "" {
		a.PutStr(semconv.AttrGPUUUID, r.gpu)
	}
	a.PutDouble(semconv.AttrStragglerScore, score)
	a.PutStr(semconv.AttrStragglerVerdict, verdict)
	if open != nil {
		a.PutInt(semconv.AttrStragglerOnsetStep, open.OnsetStep)
		a.PutInt(semconv.AttrStragglerOnsetUnixNano, open.OnsetUnixNano)
	} else {
		a.PutInt(semconv.AttrStragglerOnsetStep, st.step)
		a.PutInt(semconv.AttrStragglerOnsetUnixNano, int64(ownStart(st, r)))
	}
	if flag != nil {
		a.PutDouble(semconv.AttrStragglerComputeRatio, flag.ComputeRatio)
		a.PutDouble(semconv.AttrStragglerWaitRatio, flag.WaitRatio)
	}
	if !r.spanID.IsEmpty() {
		link := span.Links().AppendEmpty()
		link.SetTraceID(ids.trace)
		link.SetSpanID(r.spanID)
	}
}

// appendRoot writes the step's root span: the contract's ids, spanning every
// reported rank, with the step's statistics; it returns the attributes.
func (p *stragglerProcessor) appendRoot(td ptrace.Traces, st *openStep, ids stepIDs, sum straggler.StepSummary, flagged int, slow bool) pcommon.Map {
	key := st.job.key
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrTrainingJobID, key.job)
	rs.Resource().Attributes().PutStr(semconv.AttrServiceName, gatewayService)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(metadata.ScopeName)
	root := ss.Spans().AppendEmpty()
	root.SetName(semconv.SpanTrainStepRoot)
	root.SetKind(ptrace.SpanKindInternal)
	root.SetTraceID(ids.trace)
	root.SetSpanID(ids.root)
	root.SetStartTimestamp(st.start)
	root.SetEndTimestamp(st.end)
	a := root.Attributes()
	steprecord.PutStep(a, key.job, key.attempt, st.step)
	a.PutInt(semconv.AttrTrainingWorldSize, st.worldSize)
	a.PutInt(semconv.AttrStepRanksReported, int64(sum.RanksReported))
	a.PutInt(semconv.AttrStepMeanNs, int64(sum.Mean))
	a.PutInt(semconv.AttrStepMedianNs, int64(sum.Median))
	a.PutInt(semconv.AttrStepP99Ns, int64(sum.P99))
	a.PutInt(semconv.AttrStepMaxNs, int64(sum.Max))
	a.PutInt(semconv.AttrStepSlowestRank, int64(sum.SlowestRank))
	a.PutInt(semconv.AttrStragglerFlaggedRanks, int64(flagged))
	a.PutBool(semconv.AttrStepSlow, slow)
	return a
}

func (p *stragglerProcessor) logTransition(key jobKey, tr straggler.Transition) {
	v := tr.Verdict
	p.logger.Info("stragglerprocessor: straggler verdict "+tr.State.String(),
		zap.String(semconv.AttrTrainingJobID, key.job), zap.Int64(semconv.AttrTrainingAttempt, key.attempt),
		zap.Int(semconv.AttrTrainingRank, v.Rank), zap.String("group", v.Group),
		zap.String("kind", semconv.StragglerVerdictPrefix+v.Kind.String()),
		zap.Int64("onset_step", v.OnsetStep), zap.Int64("last_flagged_step", v.LastFlaggedStep),
		zap.Int("flagged_steps", v.FlaggedSteps), zap.Float64("peak_ratio", v.PeakRatio),
		zap.Float64("compute_ratio", v.Evidence.ComputeRatio), zap.Float64("wait_ratio", v.Evidence.WaitRatio))
}

func (p *stragglerProcessor) logJobTransition(key jobKey, jd straggler.JobDecision) {
	v := jd.JobVerdict
	p.logger.Info("stragglerprocessor: job verdict "+jd.JobTransition.String(),
		zap.String(semconv.AttrTrainingJobID, key.job), zap.Int64(semconv.AttrTrainingAttempt, key.attempt),
		zap.String("kind", semconv.VerdictJobSlowdown), zap.Int64("onset_step", v.OnsetStep),
		zap.Int64("opened_step", v.OpenedStep), zap.Int64("resolved_step", v.ResolvedStep),
		zap.Float64("peak_share", v.PeakShare), zap.Float64("slow_share", jd.SlowShare))
}

// commWait markers (rankRecord.commWait).
const (
	waitNotTotal  time.Duration = -1 // wait is training.phase.comm_wait_ns
	waitTotalOnly time.Duration = -2 // wait is nccl.collectives.total_ns, and the span has no comm_wait_ns
	waitNone      time.Duration = -3 // the span has neither
	waitExcluded  time.Duration = -4 // set by consistentWaits: not the step's wait source
)

// consistentWaits makes the waits a step's link test compares come from
// one source. nccl.collectives.total_ns (every collective's duration, from
// the flight recorder folded in by stepspan, or from the script) and the
// script's training.phase.comm_wait_ns (the exposed wait only, far
// smaller) cannot be compared: stepspan folds total_ns in only for the
// ranks whose dumps were read before their step left the agent, and a busy
// node's ranks that had it looked link-slow beside peers that had only
// comm_wait_ns. The step uses total_ns when at least half its ranks have
// it, else comm_wait_ns; a rank without the chosen one has no comparable
// wait this step (waitExcluded: left out of the statistics, never a link
// straggler).
func consistentWaits(records []rankRecord) {
	withTotal := 0
	for i := range records {
		if c := records[i].commWait; c >= 0 || c == waitTotalOnly {
			withTotal++
		}
	}
	if withTotal == 0 || withTotal == len(records) {
		return
	}
	useTotal := 2*withTotal >= len(records)
	for i := range records {
		r := &records[i]
		switch c := r.commWait; {
		case useTotal && (c >= 0 || c == waitTotalOnly), !useTotal && c == waitNotTotal:
			// its wait is from the chosen source
		case !useTotal && c >= 0:
			// the script's comm_wait_ns beside its total_ns
			w := c
			if _, hw := r.collectiveWait(); hw {
				w = ^w
			}
			r.wait, r.commWait = w, waitNotTotal
		default:
			r.commWait = waitExcluded
		}
	}
}

// computeSignal decodes the record's compute signal and whether its
// wait was left in it (the record did not separate the two: waitSplit).
func (r *rankRecord) computeSignal() (compute time.Duration, waitIncluded bool) {
	if r.compute < 0 {
		return ^r.compute, true
	}
	return r.compute, false
}

// comparableComputes moves the records whose compute cannot be compared
// with the step's others to the end and returns how many remain in front.
// A record that did not separate its collective wait (the flight
// recorder's tail of its rank had not arrived when its step span left the
// agent, or the script's comm_wait_ns is missing) carries the wait for the
// slowest rank in its backward phase: beside peers whose wait was taken
// off, the ranks that waited most would look like compute stragglers.
// When at least half the step's records separated it, the others are not
// judged this step; when fewer did, none is left out (the job's records
// are compared as they are, and checkCommSplit names a job none of whose
// records ever separate it).
func comparableComputes(records []rankRecord) int {
	split := 0
	for i := range records {
		if records[i].compute >= 0 {
			split++
		}
	}
	if split == len(records) || 2*split < len(records) {
		return len(records)
	}
	front := 0
	for i := range records {
		if records[i].compute >= 0 {
			records[front], records[i] = records[i], records[front]
			front++
		}
	}
	return front
}

// collectiveWait decodes the record's wait and hardware-trouble flag.
func (r *rankRecord) collectiveWait() (wait time.Duration, hwTrouble bool) {
	if r.wait < 0 {
		return ^r.wait, true
	}
	return r.wait, false
}

// isDecided reports whether a span of this step is late: the step was
// decided recently, or is older than every step the job still remembers.
func (js *jobState) isDecided(step int64) bool {
	if _, ok := js.decided[step]; ok {
		return true
	}
	return len(js.decidedOrder) == cap(js.decidedOrder) && step < js.decidedFloor
}

// markDecided remembers a decided step, forgetting the oldest beyond the
// ring's capacity.
func (js *jobState) markDecided(step int64) {
	js.decided[step] = struct{}{}
	if len(js.decidedOrder) < cap(js.decidedOrder) {
		js.decidedOrder = append(js.decidedOrder, step)
		if len(js.decidedOrder) == cap(js.decidedOrder) {
			js.decidedFloor = slices.Min(js.decidedOrder)
		}
		return
	}
	delete(js.decided, js.decidedOrder[js.decidedNext])
	js.decidedOrder[js.decidedNext] = step
	js.decidedNext = (js.decidedNext + 1) % len(js.decidedOrder)
	js.decidedFloor = slices.Min(js.decidedOrder)
}

// observeDuration reports whether d is more than factor times the mean of
// the job's recent step durations (it needs minSlowHistory of them), then
// adds d to the window.
func (js *jobState) observeDuration(d time.Duration, factor float64) bool {
	d = max(d, 0)
	n := len(js.durations)
	slow := n >= min(minSlowHistory, cap(js.durations)) && n > 0 && float64(d) > factor*js.durationSum/float64(n)
	if n < cap(js.durations) {
		js.durations = append(js.durations, d)
	} else {
		js.durationSum -= float64(js.durations[js.durationNext])
		js.durations[js.durationNext] = d
		js.durationNext = (js.durationNext + 1) % n
	}
	js.durationSum += float64(d)
	return slow
}

// computePhases are the phases whose sum is a rank's compute time: the
// model's own work. Data loading is left out: an input stall is a storage or
// loader problem, not a slow GPU or host to cordon, and single data-loader
// hiccups on random ranks (common in healthy jobs) would otherwise add up to
// false compute verdicts. The data-load share is reported per job by the
// stepmetrics connector.
var computePhases = [...]steprecord.Phase{steprecord.PhaseForward, steprecord.PhaseBackward, steprecord.PhaseOptimizer}

// extraSignals is what the decision reads of the step span beyond the step
// record (internal/steprecord).
type extraSignals struct {
	// hwTrouble: gpu.health.* reported XIDs, throttling, ECC double-bit or
	// NVLink CRC errors in the step.
	hwTrouble bool
}

// signal returns the rank's own compute time and its time in collectives.
// Compute is the sum of the phase durations when the span has any (a
// negative one counts zero), else the step's duration less the time in
// collectives, else the step's duration (which in synchronous training
// finds nothing, but is all there is). The phase contract
// (docs/training-scripts.md): a span with training.phase.comm_wait_ns (0
// included) reports compute-only phases, used as they are, and its
// comm_wait is the collective wait when nccl.collectives.total_ns is
// absent; without it backward may include waiting for an overlapped
// gradient all-reduce, so the rank's exposed wait nccl.collectives.tail_ns
// (stepspan, from the flight recorder) is taken off backward, down to 0.
func signal(a *steprecord.Attrs, span ptrace.Span) (compute, wait time.Duration) {
	hasCommWait, hasTail := a.Has(steprecord.FieldPhaseCommWait), a.Has(steprecord.FieldCollectivesTailNs)
	switch {
	case a.Has(steprecord.FieldCollectivesTotalNs):
		wait = time.Duration(max(a.Int(steprecord.FieldCollectivesTotalNs), 0))
	case hasCommWait:
		wait = time.Duration(max(a.Int(steprecord.FieldPhaseCommWait), 0))
	}
	var phases int64
	anyPhase := false
	for _, ph := range computePhases {
		if a.Has(ph.Field()) {
			v := max(a.Phase(ph), 0)
			if ph == steprecord.PhaseBackward && !hasCommWait && hasTail {
				v = max(v-max(a.Int(steprecord.FieldCollectivesTailNs), 0), 0)
			}
			phases, anyPhase = saturatingAdd(phases, v), true
		}
	}
	if anyPhase {
		return time.Duration(phases), wait
	}
	dur := int64(span.EndTimestamp()) - int64(span.StartTimestamp())
	if span.EndTimestamp() < span.StartTimestamp() {
		dur = 0
	}
	if a.Has(steprecord.FieldCollectivesTotalNs) {
		return time.Duration(max(dur-int64(wait), 0)), wait
	}
	return time.Duration(max(dur, 0)), wait
}

func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// readStepSpan reads a rank's step span's attributes into a (and the
// extra signals into x) in one pass (a lookup per attribute walked a rank
// span's twenty-odd attributes a dozen times), and reports whether the
// span carries an attribute only this processor may write (ownAttr).
func readStepSpan(a *steprecord.Attrs, x *extraSignals, attrs pcommon.Map) (forged bool) {
	for k, v := range attrs.All() {
		if a.Take(k, v, true) {
			if strings.HasPrefix(k, healthPrefix) {
				x.hwTrouble = x.hwTrouble || hardwareTrouble(k, v)
			}
			continue
		}
		if ownAttr(k) {
			forged = true
		}
	}
	return forged
}

// healthPrefix starts the GPU health attributes the stepspan processor
// adds to a rank's step span.
const healthPrefix = "gpu.health."

// hardwareTrouble reports whether a gpu.health.* attribute shows trouble
// that can slow a GPU: XIDs, throttle reasons, ECC double-bit errors or
// NVLink CRC errors (a list with an entry, or a count above 0).
func hardwareTrouble(k string, v pcommon.Value) bool {
	switch k {
	case semconv.AttrHealthXIDs, semconv.AttrHealthThrottle, semconv.AttrHealthECCDBE, semconv.AttrHealthNVLinkCRC:
	default:
		return false
	}
	if v.Type() == pcommon.ValueTypeSlice {
		s := v.Slice()
		for i := 0; i < s.Len(); i++ {
			if e := s.At(i); (e.Type() == pcommon.ValueTypeStr && e.Str() != "") || e.Type() == pcommon.ValueTypeInt {
				return true
			}
		}
		return false
	}
	n, ok := steprecord.Int(v)
	return ok && n > 0
}

// removeVerdict drops every attribute this processor writes (straggler.*
// and the root span's step.* summary) from a span that arrived with it:
// only this processor's decision may say who straggles or that a job
// slowed down, and downstream reads them from any span (the correlator a
// verdict from any span naming a rank and a job verdict from any root
// span, tail sampling step.slow). A script's train.step.root carrying
// straggler.job_verdict would otherwise open a job.slowdown for any job id.
func removeVerdict(attrs pcommon.Map) {
	attrs.RemoveIf(func(k string, _ pcommon.Value) bool { return ownAttr(k) })
}

// ownAttr reports whether k is an attribute this processor writes.
func ownAttr(k string) bool {
	return strings.HasPrefix(k, semconv.StragglerAttrPrefix) || stepSummaryAttrs[k]
}

// stepSummaryAttrs are the step.* attributes of the root span this
// processor writes.
var stepSummaryAttrs = map[string]bool{
	semconv.AttrStepMeanNs: true, semconv.AttrStepMedianNs: true, semconv.AttrStepP99Ns: true,
	semconv.AttrStepMaxNs: true, semconv.AttrStepSlowestRank: true, semconv.AttrStepRanksReported: true,
	semconv.AttrStepSlow: true,
}
